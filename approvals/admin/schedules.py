"""The schedule admin (docs/guides/schedules.md): the list with each schedule's spec, next tick
and last run; a page per schedule with its next ticks, runs, missed and skipped ticks with their
reasons, and buffered ticks; a form to create or edit one; pause, resume, trigger now and
backfill as actions with a confirmation page. Every write goes through
``approvals.services_schedules`` (the runtime's transaction body plus a LogEntry) and needs
``ilr.change_schedule``."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from approvals import selectors
from approvals import services_schedules as services
from approvals.admin.common import ReadOnlyAdmin, confirmed, link, page_context, selected_ids, table, to_confirmation
from approvals.forms import BackfillForm, ScheduleForm
from ilr import InvalidInput
from ilr.models import Schedule, ScheduleTick

ACTS = {
    "pause": "Pause: no tick starts until resumed (buffered ticks wait too).",
    "resume": "Resume: from the next tick after now; what fell in the pause is not caught up.",
    "trigger": "Trigger now: one tick at the database's time, under the schedule's overlap policy.",
    "backfill": "Backfill: the schedule's ticks in the window, now; a tick already started is not started again.",
}


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    """Schedules: read-only rows; writes through the form and the actions."""

    list_display = ("id", "workflow_name", "spec", "overlap", "paused", "next_fire_at", "last_run")
    list_filter = ("paused", "overlap")
    search_fields = ("id", "workflow_name")
    ordering = ("id",)
    actions = ["pause_selected", "resume_selected", "trigger_selected", "backfill_selected"]
    change_list_template = "admin/approvals/schedule_change_list.html"
    fields = (
        "id", "workflow_name", "workflow_version", "input", "spec", "jitter_s", "start_at", "end_at", "overlap",
        "catchup_window_s", "pause_on_failure", "paused", "note", "edit_link", "next_ticks", "runs", "missed",
        "buffered_ticks", "ticks_pruned_through",
    )  # fmt: skip
    readonly_fields = fields

    def has_schedule_permission(self, request):
        """ilr.change_schedule."""
        return request.user.has_perm(services.PERMISSION)

    @admin.display(description="spec")
    def spec(self, obj):
        """cron (zone) or every n s."""
        return f"every {obj.every_s:g} s" if obj.every_s is not None else f"{obj.cron} ({obj.timezone})"

    @admin.display(description="last run")
    def last_run(self, obj):
        """The newest started tick's workflow."""
        t = ScheduleTick.objects.filter(schedule_id=obj.id, outcome="started").order_by("-scheduled_at").first()
        return link("admin:ilr_workflow_change", t.workflow_id) if t else "—"

    @admin.display(description="edit")
    def edit_link(self, obj):
        """The form."""
        return link("admin:ilr_schedule_edit", obj.id, "Edit this schedule") if obj else ""

    def _ticks(self, obj, outcomes, n=20):
        return ScheduleTick.objects.filter(schedule_id=obj.id, outcome__in=outcomes).order_by("-scheduled_at")[:n]

    @admin.display(description="next ticks")
    def next_ticks(self, obj):
        """The next five ticks (UTC)."""
        return ", ".join(t.isoformat() for t in selectors.schedule(obj.id)["next_ticks"]) or "none"

    @admin.display(description="last runs")
    def runs(self, obj):
        """The last 20 started ticks and their runs."""
        rows = [
            [t.scheduled_at, t.kind, link("admin:ilr_workflow_change", t.workflow_id), t.final_status or "active"]
            for t in self._ticks(obj, ["started"])
        ]
        return table(["tick", "kind", "workflow", "ended"], rows)

    @admin.display(description="missed and skipped")
    def missed(self, obj):
        """The last 20 missed or skipped ticks, with their reasons."""
        rows = [[t.scheduled_at, t.outcome, t.reason] for t in self._ticks(obj, ["missed", "skipped"])]
        return table(["tick", "outcome", "reason"], rows)

    @admin.display(description="buffered")
    def buffered_ticks(self, obj):
        """Ticks waiting for the active run to end."""
        return table(["tick", "kind"], [[t.scheduled_at, t.kind] for t in self._ticks(obj, ["buffered"], 100)])

    @admin.action(permissions=["schedule"], description="Pause selected schedules…")
    def pause_selected(self, request, queryset):
        """To the pause confirmation page."""
        return to_confirmation("admin:ilr_schedule_pause", queryset)

    @admin.action(permissions=["schedule"], description="Resume selected schedules…")
    def resume_selected(self, request, queryset):
        """To the resume confirmation page."""
        return to_confirmation("admin:ilr_schedule_resume", queryset)

    @admin.action(permissions=["schedule"], description="Trigger selected schedules now…")
    def trigger_selected(self, request, queryset):
        """To the trigger confirmation page."""
        return to_confirmation("admin:ilr_schedule_trigger", queryset)

    @admin.action(permissions=["schedule"], description="Backfill selected schedules…")
    def backfill_selected(self, request, queryset):
        """To the backfill page."""
        return to_confirmation("admin:ilr_schedule_backfill", queryset)

    def get_urls(self):
        """The form and the confirmation pages, before the ModelAdmin's own URLs."""
        wrap = self.admin_site.admin_view
        acts = [path(f"{a}/", wrap(self.act_view), {"act": a}, name=f"ilr_schedule_{a}") for a in ACTS]
        return [path("edit/", wrap(self.edit_view), name="ilr_schedule_add_form"),
                path("edit/<path:schedule_id>/", wrap(self.edit_view), name="ilr_schedule_edit"),
                *acts] + super().get_urls()  # fmt: skip

    def changelist_view(self, request, extra_context=None):
        """The list, with an "add" link for those who may."""
        extra = {"can_schedule": self.has_schedule_permission(request), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def edit_view(self, request, schedule_id=None):
        """Create (no id) or edit a schedule through ``services.schedule_save``."""
        if not self.has_schedule_permission(request):
            raise PermissionDenied
        obj = Schedule.objects.filter(id=schedule_id).first() if schedule_id else None
        if schedule_id and obj is None:
            raise Http404("no such schedule")
        initial = _initial(obj) if obj else {}
        form = ScheduleForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            d = form.cleaned_data
            try:
                services.schedule_save(
                    user=request.user, schedule_id=d["schedule_id"], workflow_name=d["workflow_name"],
                    input=d["input"], **form.options(),
                )  # fmt: skip
            except InvalidInput as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.rule)
            else:
                messages.success(request, f"Schedule {d['schedule_id']} saved.")
                return HttpResponseRedirect(reverse("admin:ilr_schedule_change", args=[d["schedule_id"]]))
        title = f"Edit schedule {schedule_id}" if obj else "Add schedule"
        return TemplateResponse(
            request, "admin/approvals/schedule_form.html", page_context(self, request, title, form=form)
        )

    def act_view(self, request, act):
        """Confirm, then pause, resume, trigger or backfill each selected schedule."""
        if not self.has_schedule_permission(request):
            raise PermissionDenied
        rows = list(Schedule.objects.filter(id__in=selected_ids(request)).order_by("id"))
        if not rows:
            raise Http404("no such schedules")
        form = BackfillForm(request.POST or None) if act == "backfill" else None
        if confirmed(request) and (form is None or form.is_valid()):
            try:
                done = [_act(request, act, s.id, form) for s in rows]
            except InvalidInput as exc:
                messages.error(request, f"{exc.field}: {exc.rule}")
            else:
                messages.success(request, "; ".join(done))
                return HttpResponseRedirect(reverse("admin:ilr_schedule_changelist"))
        ctx = page_context(
            self, request, f"{act.capitalize()} schedules", rows=rows, act=act, what=ACTS[act], form=form
        )
        return TemplateResponse(request, "admin/approvals/confirm_schedule.html", ctx)


def _act(request, act: str, schedule_id: str, form) -> str:
    """Do ``act`` on one schedule; returns its line of the message (which Django's admin shows
    with a capital first letter, so it begins with "Schedule", never the case-sensitive id)."""
    user = request.user
    if act == "pause":
        return f"Schedule {schedule_id}: " + (
            "paused"
            if services.schedule_pause(user=user, schedule_id=schedule_id, note="paused in the admin")
            else "already paused"
        )
    if act == "resume":
        return f"Schedule {schedule_id}: " + (
            "resumed" if services.schedule_resume(user=user, schedule_id=schedule_id) else "not paused"
        )
    if act == "trigger":
        out = services.schedule_trigger(user=user, schedule_id=schedule_id)
        return f"Schedule {schedule_id}: {out['outcome']} {out['workflow_id'] or ''}".strip()
    d = form.cleaned_data
    out = services.schedule_backfill(
        user=user, schedule_id=schedule_id, start=d["start"], end=d["end"], overlap=d["overlap"] or None
    )
    return f"Schedule {schedule_id}: {out['ticks']} ticks, {len(out['started'])} started"


def _initial(obj: Schedule) -> dict:
    return {
        "schedule_id": obj.id, "workflow_name": obj.workflow_name, "input": obj.input, "cron": obj.cron,
        "every": obj.every_s, "timezone": obj.timezone, "jitter": obj.jitter_s, "start_at": obj.start_at,
        "end_at": obj.end_at, "overlap": obj.overlap, "catchup_window": obj.catchup_window_s,
        "pause_on_failure": obj.pause_on_failure, "version": obj.workflow_version,
    }  # fmt: skip
