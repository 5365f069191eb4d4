"""A module that registers, at import, a tier-1 target whose dedup margin is too thin (the
worker must refuse it with one line, exit 2)."""

from ilr._effects.targets import register_target


class ThinMargin:
    name = "thin-margin"
    tier = 1
    send_timeout = 590.0
    settle_margin = 20.0

    def apply(self, effect_id, payload):  # pragma: no cover - never sent
        raise AssertionError("never sent")


register_target(ThinMargin())
