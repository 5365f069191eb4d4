"""What the admin modules share: the read-only base of runtime-owned tables, the HTML helpers of
the detail pages, the indexed search, and the plumbing of the confirmation pages (an action
redirects to one with ``?ids=``; the page acts on a POST with ``confirm=yes``)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from approvals.templatetags.approvals_extras import pretty_json, reveal_html
from ilr import MAX_TEXT_LENGTH

MAX_SELECTED = 500
"""The most rows one action hands to its confirmation page, and one page acts on."""


def pre(value) -> str:
    """``value`` as indented JSON in a <pre>, characters that are not plain text shown as code
    points with a warning badge (``reveal_html``)."""
    return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", reveal_html(pretty_json(value)))


def table(headers: list[str], rows: list[list]) -> str:
    """An HTML table of ``rows`` (each cell escaped unless safe), or "none" for no rows."""
    if not rows:
        return format_html("<span style='color:#666'>{}</span>", "none")
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = mark_safe("".join("<tr>" + "".join(format_html("<td>{}</td>", c) for c in row) + "</tr>" for row in rows))
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


def link(viewname: str, arg, text=None) -> str:
    """A link to ``reverse(viewname, args=[arg])``, reading ``text`` (default: ``arg``)."""
    return format_html('<a href="{}">{}</a>', reverse(viewname, args=[arg]), text if text is not None else arg)


def indexed_search(queryset, term: str, exact_fields: tuple[str, ...], prefix_field: str | None):
    """Search by exact value (and a case-sensitive prefix of one field), which btree indexes serve,
    instead of admin's default icontains scans. Returns ``get_search_results``' (queryset, False)."""
    term = term.strip()
    if not term:
        return queryset, False
    q = Q()
    for f in exact_fields:
        q |= Q(**{f: term})
    if prefix_field:
        q |= Q(**{f"{prefix_field}__startswith": term})
    return queryset.filter(q), False


class ReadOnlyAdmin(admin.ModelAdmin):
    """A view-only admin for runtime-owned tables: no add, change or delete, ever."""

    list_per_page = 50
    show_full_result_count = False

    def has_add_permission(self, request):
        """Runtime-owned rows are never added from the admin."""
        return False

    def has_change_permission(self, request, obj=None):
        """Runtime-owned rows are never changed from the admin."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Runtime-owned rows are never deleted from the admin."""
        return False


# -- confirmation pages --------------------------------------------------------------------------


def to_confirmation(viewname: str, queryset) -> HttpResponseRedirect:
    """An action's answer: a redirect to the confirmation page ``viewname`` with the ids of the
    first MAX_SELECTED selected rows (``?ids=a&ids=b``)."""
    ids = list(queryset.values_list("id", flat=True)[:MAX_SELECTED])
    return HttpResponseRedirect(reverse(viewname) + "?" + urlencode([("ids", i) for i in ids]))


def submitted(request):
    """The confirmation page's parameters: the POST on submit, the GET before."""
    return request.POST if request.method == "POST" else request.GET


def selected_ids(request) -> list[str]:
    """The ``ids`` a confirmation page acts on, at most MAX_SELECTED. An id no row can have (over
    MAX_TEXT_LENGTH characters, or holding a NUL, which PostgreSQL refuses in text) is dropped, so
    it finds nothing (a 404 when nothing else is selected) instead of raising a database error."""
    ids = submitted(request).getlist("ids")[:MAX_SELECTED]
    return [i for i in ids if len(i) <= MAX_TEXT_LENGTH and "\x00" not in i]


def confirmed(request) -> bool:
    """True when the person pressed the page's confirm button (a POST with ``confirm=yes``)."""
    return request.method == "POST" and request.POST.get("confirm") == "yes"


def page_context(model_admin, request, title: str, **extra) -> dict:
    """The template context of an admin page of ``model_admin``'s: the site's context, ``opts``
    and ``title``, and ``extra``."""
    return {**model_admin.admin_site.each_context(request), "opts": model_admin.opts, "title": title, **extra}
