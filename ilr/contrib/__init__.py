"""Integrations with agent frameworks, each behind an optional extra (``interlock[pydantic-ai]``,
``interlock[openai-agents]``)."""
