"""Django system checks of the ``ilr`` app: what the runtime needs of the project's settings.

ilr.E001: a database that is not PostgreSQL. ilr.E002: an ``ILR_*`` setting of the wrong shape.
ilr.W002: a two-person rule under a name no target or action has. ilr.W003: an ``ILR_*`` name
that is a near miss of a setting's.
"""

from __future__ import annotations

import difflib

from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections


@register(Tags.database)
def database_is_postgresql(app_configs=None, databases=None, **kwargs) -> list[Error]:
    """ilr.E001 for each database checked (``migrate`` checks the one it migrates; ``check
    --database``) that is not PostgreSQL: the runtime's tables, locks, LISTEN/NOTIFY and SQL are
    PostgreSQL's (15 or newer). Reads the backend's vendor; no connection is opened."""
    errors = []
    for alias in databases or ():
        vendor = connections[alias].vendor
        if vendor != "postgresql":
            engine = connections[alias].settings_dict.get("ENGINE")
            errors.append(
                Error(
                    f"ilr needs PostgreSQL 15 or newer; DATABASES[{alias!r}] is {vendor} ({engine}).",
                    hint="Set its ENGINE to 'django.db.backends.postgresql' (or a backend built on it) and "
                    "point it at a PostgreSQL 15+ server.",
                    id="ilr.E001",
                )
            )
    return errors


@register()
def settings_have_their_shape(app_configs=None, **kwargs) -> list[CheckMessage]:
    """ilr.E002 for each ``ILR_*`` setting (each entry of ``ILR_TWO_PERSON_CENTS``) of the wrong
    shape (``ilr._conf.setting_problems``), naming it and the rule; ilr.W003 for an ``ILR_*``
    setting ilr does not know whose name is close to one it does (a typo leaves the rule unset)."""
    from django.conf import settings as django_settings

    from ilr._conf import DEFAULTS, PREFIX, setting_problems

    out: list[CheckMessage] = []
    for name in DEFAULTS:
        value = getattr(django_settings, PREFIX + name, DEFAULTS[name])
        for setting, rule in setting_problems(name, value):
            out.append(
                Error(
                    f"{setting}: {rule}.",
                    hint="Every ILR_* setting and its default: ilr/_conf.py. Until it is fixed, the rule it "
                    "sets is not what the project meant.",
                    id="ilr.E002",
                )
            )
    known = [PREFIX + n for n in DEFAULTS]
    for name in dir(django_settings):
        if name.startswith(PREFIX) and name not in known:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
            if near:
                out.append(
                    Warning(
                        f"{name} is not an ilr setting; did you mean {near[0]}? As written it changes nothing.",
                        hint=f"ilr's settings: {', '.join(known)} (ilr/_conf.py).",
                        id="ilr.W003",
                    )
                )
    return out


@register()
def two_person_rules_name_a_target_or_action(app_configs=None, **kwargs) -> list[CheckMessage]:
    """ilr.W002 for each key of ``ILR_TWO_PERSON_CENTS`` that is neither a registered target's
    name nor its action (nor "refund", the action of a target that declares none): a request
    is matched to a rule by those names only, so such a rule never applies.

    Targets are those registered in this process (``ilr.registered_targets``). The
    ``ilr`` app imports every installed app's ``workflows`` module in its ``ready()``, which
    Django runs before any check, so a target registered there is known here; one built inside
    a workflow function and never registered is not, and the warning says so.
    """
    from django.conf import settings as django_settings

    from ilr._effects.targets import attr, registered_targets

    rules = getattr(django_settings, "ILR_TWO_PERSON_CENTS", None)
    if not isinstance(rules, dict):
        return []
    targets = registered_targets()
    actions: dict[str, list[str]] = {"refund": []}
    for name, target in targets.items():
        actions.setdefault(attr(target, "action"), []).append(name)
    out: list[CheckMessage] = []
    for key in rules:
        if not isinstance(key, str) or key in targets or key in actions:
            continue
        near = difflib.get_close_matches(key, [*actions, *targets], n=1, cutoff=0.6)
        if near and near[0] in actions:
            owners = actions[near[0]]
            said = f" Did you mean {near[0]!r}" + (
                f" (the action of target {', '.join(map(repr, owners))})?" if owners else " (the default action)?"
            )
        elif near:
            said = f" Did you mean {near[0]!r} (a registered target)?"
        else:
            said = ""
        registered = ", ".join(f"{n!r} (action {attr(t, 'action')!r})" for n, t in sorted(targets.items())) or "none"
        out.append(
            Warning(
                f"ILR_TWO_PERSON_CENTS[{key!r}] names no registered target and no action of one, so the "
                f"two-person rule it sets never applies to a request.{said}",
                hint=f"Registered targets: {registered}. A request is matched by its action, then its target's "
                "name. Targets are known here once an installed app's workflows module registers them "
                "(ilr.register_target; imported before checks run); a target built inside a "
                "workflow and never registered is not, so register it (the review UI needs it too) or "
                "silence this with SILENCED_SYSTEM_CHECKS = ['ilr.W002'].",
                id="ilr.W002",
            )
        )
    return out


@register()
def declared_queues_are_configured(app_configs=None, **kwargs) -> list[CheckMessage]:
    """ilr.W004 for each registered workflow whose ``queue`` is not in ``ILR_QUEUES``: every start
    of it would be refused."""
    from ilr import _registry as registry
    from ilr._conf import settings
    from ilr._queues import rules

    known = rules(settings.QUEUES)
    out: list[CheckMessage] = []
    for d in registry.all_definitions():
        if d.queue is not None and d.queue not in known:
            out.append(
                Warning(
                    f"workflow {d.key} declares queue {d.queue!r}, which is not in ILR_QUEUES: every start "
                    "of it is refused.",
                    hint=f"Add {d.queue!r} to ILR_QUEUES, or fix the workflow's queue=.",
                    id="ilr.W004",
                )
            )
    return out
