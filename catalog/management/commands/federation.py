"""``manage.py federation``: the peer clusters, what they offer, and what
this cluster offers them.

The peers themselves are cluster settings (``federation.peers``): they are
changed with ``manage.py config``, not here.
"""

from __future__ import annotations

from ... import selectors
from ...services.federation import fetch_all_peers
from ..cli import LlmgwCommand, iso, one_line, shorten


class Command(LlmgwCommand):
    help = "List the peer clusters and their offers, fetch them now, and show this cluster's offer."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)
        p = sub.add_parser("list", help="every peer: last fetch, stale or not, last error, models offered")
        self.add_json_argument(p)
        p = sub.add_parser("fetch", help="fetch every peer's offer now, then list the peers")
        self.add_json_argument(p)
        p = sub.add_parser("offer", help="what this cluster offers its peers")
        self.add_json_argument(p)

    def handle(self, *args, **options):
        getattr(self, "do_" + options["action"])(options)

    def do_list(self, options):
        self._print_peers(_peers(), options)

    def do_fetch(self, options):
        fetch_all_peers(force=True)
        peers = _peers()
        # Not a refusal: the other peers were fetched, and an unreachable
        # peer keeps its last offer. Said on stderr so it is not missed.
        for peer in peers:
            if peer["last_error"]:
                self.stderr.write(f"peer {peer['name']}: not fetched, its last offer is kept: "
                                  f"{one_line(peer['last_error'])}")
        self._print_peers(peers, options)

    def do_offer(self, options):
        offer = selectors.offer(selectors.in_force())
        if options["as_json"]:
            self.print_json(offer)
            return
        count = len(offer["models"])
        self.stdout.write(f"cluster {offer['cluster'] or '(unnamed)'} offers {count} model{'' if count == 1 else 's'} "
                          f"to its peers ({offer['digest']})")
        rows = [[m["name"], ", ".join(m["aliases"]) or "-", m["engine"] or "-", shorten(m["description"] or "-", 50)]
                for m in offer["models"]]
        self.print_table(["NAME", "ALIASES", "ENGINE", "DESCRIPTION"], rows,
                         empty="(federation.offer in the cluster settings offers none)")

    def _print_peers(self, peers: list[dict], options) -> None:
        if options["as_json"]:
            self.print_json(peers)
            return
        rows = [[p["name"], p["url"], _time(p["fetched_at"]), "yes" if p["stale"] else "no",
                 shorten(p["last_error"] or "-", 40), _models(p["models"])] for p in peers]
        self.print_table(["PEER", "URL", "LAST FETCH", "STALE", "LAST ERROR", "MODELS"], rows,
                         empty="no peers (federation.peers in the cluster settings; see manage.py config)")


def _peers() -> list[dict]:
    peers = selectors.peer_items()
    for peer in peers:
        peer["fetched_at"], peer["checked_at"] = iso(peer["fetched_at"]), iso(peer["checked_at"])
    return peers


def _time(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "never"


def _models(names: list[str]) -> str:
    if not names:
        return "0"
    return f"{len(names)}: {shorten(', '.join(names), 60)}"
