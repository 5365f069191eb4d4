"""Forms of the review UI and the admin. None of them has a ``by`` field: the actor is always
the logged-in user."""

from __future__ import annotations

from django import forms

from ilr import MAX_LIFETIME_S, SCHEDULE_OVERLAPS, InvalidInput, check_text, check_who, lifetime_seconds
from ilr.models import Grant

EXPIRY_CHOICES = [
    ("", "never (until revoked)"),
    ("900", "in 15 minutes"),
    ("3600", "in 1 hour"),
    ("14400", "in 4 hours"),
    ("86400", "in 24 hours"),
]


class ApproveForm(forms.Form):
    """Approve a proposal. ``payload_hash`` is the hash of the proposal the reviewer saw; the
    payload and premises themselves are read from the workflow's record, never from the form."""

    payload_hash = forms.CharField(widget=forms.HiddenInput, max_length=64)
    expires_in = forms.TypedChoiceField(
        choices=EXPIRY_CHOICES, required=False, coerce=float, empty_value=None, label="Approval expires"
    )


class RejectForm(forms.Form):
    """Reject a proposal with a reason the workflow receives."""

    payload_hash = forms.CharField(widget=forms.HiddenInput, max_length=64, required=False)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=2000,
        strip=True,
        error_messages={"required": "A rejection needs a reason."},
    )


APPLIED_CHOICES = [("yes", "it landed"), ("no", "it did not land"), ("unsure", "unsure")]


class ReconcileForm(forms.Form):
    """Attest what happened to an AMBIGUOUS effect; evidence is required."""

    evidence = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=4000,
        strip=True,
        error_messages={
            "required": "A reconcile needs evidence: what shows the effect did "
            "or did not land (a ledger reference, a ticket)."
        },
    )
    applied = forms.ChoiceField(choices=APPLIED_CHOICES, widget=forms.RadioSelect, label="The evidence shows")

    def applied_value(self) -> bool | None:
        """The ``applied`` answer as reconcile_in takes it: True, False or None."""
        return {"yes": True, "no": False, "unsure": None}[self.cleaned_data["applied"]]


class GrantCreateForm(forms.ModelForm):
    """The admin's policy grant form: principal, action, cap and lifetime (``granted_by`` is the
    logged-in user)."""

    expires_in_hours = forms.FloatField(
        required=False, min_value=0.001, label="Expires in (hours)", help_text="Empty: never expires (until revoked)."
    )

    class Meta:
        model = Grant
        fields = ["principal", "action", "max_cents"]
        widgets = {"principal": forms.TextInput, "action": forms.TextInput}
        help_texts = {
            "principal": "Who may act: a workflow name (e.g. refund) or an agent.",
            "action": "The action covered, e.g. refund.",
            "max_cents": "Cap on the payload amount in cents; empty for no cap.",
        }

    def clean_principal(self):
        """The runtime's rule for a name (``ilr.check_who``), as a form error on the field."""
        return _runtime_rule(check_who, self.cleaned_data.get("principal"), "principal")

    def clean_action(self):
        """The runtime's rule for an action name (``ilr.check_text``)."""
        return _runtime_rule(check_text, self.cleaned_data.get("action"), "action")

    def clean_expires_in_hours(self):
        """At most the runtime's longest lifetime (``ilr.MAX_LIFETIME_S``), finite: an
        absurd one is an error on this field, not a refusal after the form (a bare 403)."""
        hours = self.cleaned_data.get("expires_in_hours")
        if hours is not None:
            try:
                lifetime_seconds(hours * 3600.0, "expires_in")
            except InvalidInput:
                raise forms.ValidationError(
                    f"Expires in (hours) must be at most {MAX_LIFETIME_S // 3600} hours (a hundred years); "
                    "empty for never."
                ) from None
        return hours

    def clean_max_cents(self):
        """A cap is a non-negative number of cents."""
        value = self.cleaned_data.get("max_cents")
        if value is not None and value < 0:
            raise forms.ValidationError("A cap is a non-negative number of cents.")
        return value

    def expires_in_seconds(self) -> float | None:
        """The lifetime in seconds, or None."""
        hours = self.cleaned_data.get("expires_in_hours")
        return None if hours is None else hours * 3600.0


def _runtime_rule(check, value, field: str):
    """``check(value, field)``'s InvalidInput as a form error on ``field``."""
    if value is None:
        return value
    try:
        return check(value, field)
    except InvalidInput as exc:
        raise forms.ValidationError(str(exc)) from None


class ScheduleForm(forms.Form):
    """The admin's schedule form (``rt.schedule``'s arguments; docs/guides/schedules.md). The
    runtime checks each field: its refusal is an error on that field."""

    schedule_id = forms.CharField(max_length=150)
    workflow_name = forms.CharField(max_length=200)
    input = forms.JSONField(required=False, initial=dict, help_text="Plain JSON, the same for every tick; empty: {}.")
    cron = forms.CharField(required=False, help_text="A 5-field cron expression; or give 'every'.")
    every = forms.FloatField(required=False, help_text="Seconds between ticks.")
    timezone = forms.CharField(initial="UTC", help_text="An IANA zone, e.g. Europe/Berlin.")
    jitter = forms.FloatField(initial=0, help_text="Seconds; each tick fires up to this much later.")
    start_at = forms.DateTimeField(required=False)
    end_at = forms.DateTimeField(required=False)
    overlap = forms.ChoiceField(choices=[(o, o) for o in SCHEDULE_OVERLAPS], initial="skip")
    catchup_window = forms.FloatField(initial=60, help_text="Seconds; a later tick is recorded missed, not run.")
    pause_on_failure = forms.BooleanField(required=False)
    version = forms.CharField(required=False, help_text="Empty: the newest version at each tick.")

    def options(self) -> dict:
        """``rt.schedule``'s keyword arguments from the cleaned data."""
        d = self.cleaned_data
        keys = ("timezone", "jitter", "start_at", "end_at", "overlap", "catchup_window", "pause_on_failure")
        return {"cron": d["cron"] or None, "every": d["every"], "version": d["version"] or None} | {
            k: d[k] for k in keys
        }


class BackfillForm(forms.Form):
    """A backfill's window and overlap policy."""

    start = forms.DateTimeField()
    end = forms.DateTimeField()
    overlap = forms.ChoiceField(choices=[("", "the schedule's")] + [(o, o) for o in SCHEDULE_OVERLAPS], required=False)
