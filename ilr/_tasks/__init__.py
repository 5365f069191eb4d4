"""The private parts of ``ilr.tasks``, the Django Tasks backend: the task workflow, one attempt,
and the read that builds a ``TaskResult``."""
