"""Django admin over every ilr table, and the approvals app's own table.

The ilr tables are the runtime's: nothing here writes them through the ORM. Append-only and
runtime-owned tables are read-only (no add, change or delete); the few writes an operator may
make are admin actions with a confirmation page (a ``get_urls`` view wrapped in
``admin_site.admin_view``), each a call into ``approvals.services`` (the runtime's transaction
body plus a LogEntry, in one transaction):

- grants: create a policy grant (``grant_in``); revoke (``revoke_in``), after which the page lists
  the effect ids revoke returned: "these may still land";
- workflows: cancel (``cancel_in``); resume stuck workflows (``resume_in``); deployments: retire a
  version, with its drain report.

The workflow list and the deployments page say when work is due and no live worker serves its
(name, version) ("due, no live worker serves refund@v1"; ``rt.unserved()``).

Tables with a composite primary key (deployments, steps, claims) cannot be registered in
Django 5.2's admin; steps and claims are shown in the workflow page (step timeline, claim
history) and deployments on their own admin page (linked from the workflow list).

Every list is paginated without a full count and filters only on indexed or small columns, so
pages stay fast with tens of thousands of workflows.

The operations page (``operations``; /admin/ilr/workflow/operations/, linked from the admin index
and the workflow list) shows the state figures at a glance and the items that need a person.

Modules: ``workflows`` (WorkflowAdmin), ``effects`` (effects, the journal), ``grants`` (grants,
approval requests), ``signals`` (signals, model calls, responses), ``slots`` (concurrency
keys' holders and waiters), ``filters`` (the list
filters), ``actions`` (cancel, resume, revoke and their confirmation pages), ``deployments``
(the deployments page, retire), ``common`` (what they share).
"""

from django.contrib import admin

# Importing the modules registers their ModelAdmins (Django's autodiscover imports this package).
from approvals.admin import effects, grants, schedules, signals, slots, workflows  # noqa: F401

if admin.site.index_template is None:
    # The admin index links the operations page above the app list (a project's own index wins).
    admin.site.index_template = "admin/approvals/index.html"
