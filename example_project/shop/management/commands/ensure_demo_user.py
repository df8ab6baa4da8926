"""`manage.py ensure_demo_user NAME`: create or update a staff superuser for the demo.

The password comes from the DEMO_PASSWORD environment variable (scripts/demo.sh makes a
random one each start), so it never shows in a process list or the code.
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Create or update a staff superuser whose password is $DEMO_PASSWORD."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DEMO_PASSWORD", "")
        if len(password) < 12:
            raise CommandError("Set DEMO_PASSWORD to a password of at least 12 characters.")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=options["username"], defaults={"email": "demo@example.com"}
        )
        user.is_staff = True
        user.is_superuser = True
        user.is_active = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"{'Created' if created else 'Updated'} staff user {user.username!r}.")
