"""`python manage.py adduser NAME --role ROLE [--password PW | --password-file FILE] [--token NAME]`.

Creates (or updates the role of) a user; prints a generated password when none is given, and
with --token also creates an API token and prints it once (for automation and CI set-up).
`--password-file` reads the password from a file (the Helm chart's first admin: a Secret mounted
into the migrations Job, so that it appears in no command line or environment), and with
`--if-no-users` the command does nothing once any user exists.
"""

from __future__ import annotations

import secrets

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from policies import services
from policies.roles import ROLES


class Command(BaseCommand):
    help = "Create a user with a role (viewer, editor, publisher, admin), optionally with an API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        secret = parser.add_mutually_exclusive_group()
        secret.add_argument("--password", help="default: a random one, printed")
        secret.add_argument(
            "--password-file",
            metavar="FILE",
            help="read the password from FILE (its first line; a Secret mounted as a file)",
        )
        parser.add_argument(
            "--token", metavar="NAME", help="also create an API token with this name and print it"
        )
        parser.add_argument(
            "--if-no-users",
            action="store_true",
            help="do nothing when any user exists (first start)",
        )

    def handle(self, *args, **options) -> None:
        if options["if_no_users"] and User.objects.exists():
            self.stdout.write("users exist: nothing to do")
            return
        if options["password_file"]:
            options["password"] = _password_from(options["password_file"])
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=options["username"])
            password = options["password"]
            if created or password:
                password = password or secrets.token_urlsafe(12)
                user.set_password(password)
            user.is_staff = options["role"] == "admin"
            user.save()
            user.groups.remove(*Group.objects.filter(name__in=ROLES))
            user.groups.add(Group.objects.get_or_create(name=options["role"])[0])
        self.stdout.write(
            f"user {user.username}: {'created' if created else 'updated'}, role {options['role']}"
        )
        if created and not (options["password"] or options["password_file"]):
            self.stdout.write(f"password: {password}")
        if options["token"]:
            _, raw = services.api_token_create(actor=user, user=user, name=options["token"])
            self.stdout.write(f"token: {raw}")


MIN_PASSWORD = 12  # a generated first-admin password is 24 characters (the chart's Secret)


def _password_from(path: str) -> str:
    """The first line of `path`; a missing, unreadable or short one stops the command."""
    try:
        with open(path, encoding="utf-8") as handle:
            password = handle.readline(1024).rstrip("\r\n")
    except OSError as exc:
        raise CommandError(f"--password-file {path}: {exc.strerror}") from None
    if len(password) < MIN_PASSWORD:
        raise CommandError(
            f"--password-file {path}: the password must have at least {MIN_PASSWORD} characters"
        )
    return password
