"""``manage.py tokens``: API tokens for users.

``tokens create`` prints the token alone, so that
``TOKEN=$(manage.py tokens create alice)`` works; it is shown this once and
only its hash is kept.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from ...models import ApiToken
from ...services import users as services
from ..cli import LlmgwCommand, refusals


class Command(LlmgwCommand):
    help = "Create, list and revoke API tokens."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)

        p = sub.add_parser("create", help="a new token for a user, printed alone on stdout")
        p.add_argument("username", metavar="NAME")
        p.add_argument("--name", dest="label", default="", metavar="LABEL", help="what the token is for")
        self.add_actor_argument(p)

        p = sub.add_parser("list", help="a user's tokens (never the keys)")
        p.add_argument("username", metavar="NAME")
        self.add_json_argument(p)

        p = sub.add_parser("revoke", help="revoke a token by its id (see list)")
        p.add_argument("token_id", metavar="ID", type=int)
        self.add_actor_argument(p)

    def handle(self, *args, **options):
        getattr(self, "do_" + options["action"])(options)

    def do_create(self, options):
        with refusals():
            key = services.create_token(username=options["username"], name=options["label"],
                                        by=self.actor(options))
        self.stdout.write(key)

    def do_list(self, options):
        username = options["username"]
        if not get_user_model().objects.filter(username=username).exists():
            raise CommandError(f"refused: no user {username!r}")
        tokens = [_token_row(t) for t in ApiToken.objects.filter(user__username=username).order_by("created_at")]
        if options["as_json"]:
            self.print_json(tokens)
            return
        rows = [[str(t["id"]), t["prefix"] + "…", t["name"] or "-", t["created_at"] or "-",
                 t["last_used_at"] or "never", t["revoked_at"] or "-"] for t in tokens]
        self.print_table(["ID", "PREFIX", "NAME", "CREATED", "LAST USED", "REVOKED"], rows,
                         empty=f"{username} has no tokens")

    def do_revoke(self, options):
        with refusals():
            services.revoke_token(token_id=options["token_id"], by=self.actor(options))
        self.stdout.write(f"revoked token {options['token_id']}")


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _token_row(token: ApiToken) -> dict:
    return {"id": token.pk, "prefix": token.prefix, "name": token.name, "created_at": _iso(token.created_at),
            "last_used_at": _iso(token.last_used_at), "revoked_at": _iso(token.revoked_at)}
