#!/usr/bin/env python
"""Django's command-line utility for the tasks-and-workflows example."""

import os
import sys


def main():
    """Run a management command with this project's settings."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
