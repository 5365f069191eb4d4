"""WSGI entry point (gunicorn interlock_project.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "interlock_project.settings")
application = get_wsgi_application()
