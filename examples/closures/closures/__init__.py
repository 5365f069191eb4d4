"""The account-closure example project (settings, URLs, WSGI)."""
