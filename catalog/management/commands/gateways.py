"""``manage.py gateways``: the gateways the console publishes catalogs to.

A delivery is queued, never sent by the command itself; in the embedded
default (no broker) it runs before the command returns, so the state
printed afterwards is the outcome of that delivery.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import CommandError

from ... import selectors
from ...models import Gateway
from ...services import gateways as services
from ..cli import LlmgwCommand, iso, one_line, refusals, shorten


class Command(LlmgwCommand):
    help = "List, register, remove, enable, disable and push to the gateways."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)

        p = sub.add_parser("list", help="every gateway: state, acked version against the newest, last error")
        self.add_json_argument(p)

        p = sub.add_parser("add", help="register a gateway; the newest catalog is pushed to it at once")
        p.add_argument("name", metavar="NAME")
        p.add_argument("url", metavar="URL", help="the gateway's base URL (it receives PUT URL/v1/catalog)")
        # A token on the command line lands in the shell history and in
        # every `ps` listing; an environment variable does not.
        p.add_argument("--token-from-env", metavar="VAR", dest="token_env",
                       help="read the gateway's token from this environment variable")
        p.add_argument("--token", metavar="TOKEN", help="the token itself (it lands in your shell history: "
                                                        "prefer --token-from-env)")
        self.add_actor_argument(p)
        self.add_json_argument(p)

        p = sub.add_parser("remove", help="stop publishing to a gateway and forget it")
        p.add_argument("name", metavar="NAME")
        self.add_actor_argument(p)

        for action, what in (("push", "deliver the newest catalog now, whatever the backoff says"),
                             ("enable", "publish to the gateway again (a delivery is queued)"),
                             ("disable", "stop publishing to the gateway, keeping it registered")):
            p = sub.add_parser(action, help=what)
            p.add_argument("name", metavar="NAME")
            self.add_actor_argument(p)
            self.add_json_argument(p)

    def handle(self, *args, **options):
        getattr(self, "do_" + options["action"])(options)

    def do_list(self, options):
        latest = selectors.latest_catalog_version()
        items = [_item(g, latest) for g in Gateway.objects.order_by("name")]
        if options["as_json"]:
            self.print_json(items)
            return
        rows = [[i["name"], i["url"], "yes" if i["enabled"] else "no", i["state"], _acked(i),
                 (i["last_seen"] or "never")[:19].replace("T", " "), shorten(i["last_error"] or "-", 60)]
                for i in items]
        self.print_table(["NAME", "URL", "ENABLED", "STATE", "ACKED", "LAST SEEN", "LAST ERROR"], rows,
                         empty="no gateways registered (add one with: manage.py gateways add NAME URL "
                               "--token-from-env VAR)")

    def do_add(self, options):
        token = self._token(options)
        with refusals(options["name"]):
            gateway = services.register_gateway(name=options["name"], url=options["url"], token=token,
                                                by=self.actor(options))
        self._print_state(gateway.name, options, f"registered gateway {gateway.name} at {gateway.url}")

    def do_remove(self, options):
        with refusals(options["name"]):
            services.remove_gateway(name=options["name"], by=self.actor(options))
        self.stdout.write(f"removed gateway {options['name']}")

    def do_push(self, options):
        with refusals(options["name"]):
            services.push_now(name=options["name"], by=self.actor(options))
        self._print_state(options["name"], options, f"pushed to {options['name']}")

    def do_enable(self, options):
        self._set_enabled(options, True)

    def do_disable(self, options):
        self._set_enabled(options, False)

    def _set_enabled(self, options, enabled: bool) -> None:
        with refusals(options["name"]):
            services.update_gateway(name=options["name"], changes={"enabled": enabled}, by=self.actor(options))
        self._print_state(options["name"], options, f"{'enabled' if enabled else 'disabled'} {options['name']}")

    def _token(self, options) -> str:
        if options["token_env"] and options["token"]:
            raise CommandError("refused: give --token-from-env VAR or --token TOKEN, not both")
        if options["token_env"]:
            var = options["token_env"]
            token = os.environ.get(var)
            if not token:
                raise CommandError(f"refused: the environment variable {var} is not set or is empty")
            return token
        if options["token"]:
            self.stderr.write("warning: a token given with --token lands in your shell history and in `ps` "
                              "listings; prefer --token-from-env VAR")
            return options["token"]
        raise CommandError("refused: token: give the gateway's token with --token-from-env VAR")

    def _print_state(self, name: str, options, done: str) -> None:
        """The gateway as it is now: after the delivery when it ran inline,
        else as queued for a worker."""
        gateway = Gateway.objects.filter(name=name).first()
        if gateway is None:  # removed meanwhile by someone else
            raise CommandError(f"refused: no gateway {name!r}")
        item = _item(gateway, selectors.latest_catalog_version())
        if options["as_json"]:
            self.print_json(item)
            return
        queued = "" if settings.CELERY_TASK_ALWAYS_EAGER else " (delivery queued for the workers)"
        acked = "none" if item["acked_version"] is None else item["acked_version"]
        line = f"{done}{queued}: {item['state']}, acked version {acked} of {item['current_version'] or 'none'}"
        if item["last_error"]:
            line += f"; last error: {one_line(item['last_error'])}"
        self.stdout.write(line)


def _item(gateway: Gateway, latest) -> dict:
    item = selectors.gateway_item(gateway, latest)
    item["last_seen"] = iso(item["last_seen"])
    # The acked version means little without the newest one beside it.
    item["current_version"] = latest.version if latest else None
    return item


def _acked(item: dict) -> str:
    acked = "-" if item["acked_version"] is None else str(item["acked_version"])
    current = "-" if item["current_version"] is None else str(item["current_version"])
    return f"{acked}/{current}"
