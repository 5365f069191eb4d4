"""The workflow context: ctx.step, ctx.effect, replay, versioning (private)."""
