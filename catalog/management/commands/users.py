"""``manage.py users add NAME --role viewer|operator|admin [--password-from-env VAR]``."""

from __future__ import annotations

import os

from django.core.management.base import CommandError

from ...roles import ROLES
from ...services import users as services
from ..cli import LlmgwCommand, refusals


class Command(LlmgwCommand):
    help = "Add console users, or give an existing user a new role."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)
        p = sub.add_parser("add", help="add a user with one role (an existing user gets the new role)")
        p.add_argument("username", metavar="NAME")
        p.add_argument("--role", choices=ROLES, required=True)
        # A password on the command line would land in the shell history and
        # in every `ps` listing; an environment variable does not.
        p.add_argument("--password-from-env", metavar="VAR", dest="password_env",
                       help="read the password from this environment variable (else: no password, token use only)")
        self.add_actor_argument(p)
        self.add_json_argument(p)

    def handle(self, *args, **options):
        password = None
        if options["password_env"]:
            var = options["password_env"]
            password = os.environ.get(var)
            if not password:
                raise CommandError(f"refused: the environment variable {var} is not set or is empty")
        with refusals(options["username"]):
            user = services.add_user(username=options["username"], role=options["role"], password=password,
                                     by=self.actor(options))
        if options["as_json"]:
            self.print_json({"username": user.username, "role": options["role"],
                             "password_set": user.has_usable_password()})
        else:
            self.stdout.write(f"user {user.username} has the role {options['role']}"
                              + ("" if user.has_usable_password() else " (no password: API tokens only)"))
