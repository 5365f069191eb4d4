"""WSGI entry point of the account-closure example."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "closures.settings")
application = get_wsgi_application()
