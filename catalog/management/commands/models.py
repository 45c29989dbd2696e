"""``manage.py models``: the runtime models, the counterpart of ``llmgw ctl models``.

Every change goes through ``catalog.services.models``, so the CLI refuses
exactly what the API and the console refuse, in the same words.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from ... import builder, selectors
from ...services import models as services
from ..cli import LlmgwCommand, refusals

# Words a shell user can type for "empty" where an empty argument is awkward.
NO_CLASS = ("", "none")
SHARED_OWNER = ("", "shared")


class Command(LlmgwCommand):
    help = "List, show, add, remove and change the catalog's models."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)
        reads, writes = [], []

        p = sub.add_parser("list", help="every model in force, filtered")
        p.add_argument("--kind", choices=selectors.KINDS)
        p.add_argument("--class", dest="cls", choices=builder.CLASSES, help="effective class")
        p.add_argument("--owner", help="org:ID, team:ID, project:ID")
        p.add_argument("--engine")
        p.add_argument("-q", dest="q", metavar="TEXT", help="search names, aliases and descriptions")
        reads.append(p)

        p = sub.add_parser("show", help="one model by name or alias, with who uses it")
        p.add_argument("name", metavar="NAME")
        reads.append(p)

        p = sub.add_parser("add", help="add (or replace) a runtime model from a JSON or YAML definition")
        p.add_argument("file", metavar="FILE", help="a JSON or YAML model definition; - for stdin")
        writes.append(p)

        p = sub.add_parser("remove", help="remove a runtime model")
        p.add_argument("name", metavar="NAME")
        self.add_actor_argument(p)

        p = sub.add_parser("scale", help="set the replicas")
        p.add_argument("name", metavar="NAME")
        p.add_argument("--min", type=int, required=True, dest="min_replicas", metavar="N")
        p.add_argument("--max", type=int, required=True, dest="max_replicas", metavar="N")
        writes.append(p)

        p = sub.add_parser("resources", help="set a profile's (default: every profile's) host memory and CPU cores")
        p.add_argument("name", metavar="NAME")
        p.add_argument("--profile")
        p.add_argument("--memory-gb", type=int, required=True, dest="memory_gb", metavar="N")
        p.add_argument("--cpu-cores", type=int, required=True, dest="cpu_cores", metavar="N")
        writes.append(p)

        p = sub.add_parser("class", help="set the class: critical, standard, opportunistic, or none")
        p.add_argument("name", metavar="NAME")
        p.add_argument("value", metavar="CLASS")
        writes.append(p)

        p = sub.add_parser("owner", help="set the owner: org:ID, team:ID, project:ID, or shared")
        p.add_argument("name", metavar="NAME")
        p.add_argument("value", metavar="OWNER")
        writes.append(p)

        p = sub.add_parser("adapters", help="replace the LoRA adapters with a JSON or YAML list")
        p.add_argument("name", metavar="NAME")
        p.add_argument("file", metavar="FILE", help="a JSON or YAML list of {name, source}; - for stdin")
        writes.append(p)

        p = sub.add_parser("source", help="move to other weights, recording where they came from")
        p.add_argument("name", metavar="NAME")
        p.add_argument("source", metavar="SOURCE")
        p.add_argument("--origin-repo")
        p.add_argument("--origin-revision")
        p.add_argument("--origin-digest")
        p.add_argument("--origin-fetched-at")
        writes.append(p)

        p = sub.add_parser("canary", help="send a share of traffic to another model, or --clear")
        p.add_argument("name", metavar="NAME")
        p.add_argument("model", nargs="?", metavar="MODEL")
        p.add_argument("--percent", type=int, metavar="N")
        p.add_argument("--clear", action="store_true")
        writes.append(p)

        p = sub.add_parser("eval", help="set the quality gate new weights must pass, or --clear")
        p.add_argument("name", metavar="NAME")
        p.add_argument("--suite")
        p.add_argument("--min-score", type=float, dest="min_score", metavar="X")
        p.add_argument("--clear", action="store_true")
        writes.append(p)

        p = sub.add_parser("fallbacks", help="replace the fallbacks (none given: no fallbacks)")
        p.add_argument("name", metavar="NAME")
        p.add_argument("models", nargs="*", metavar="MODEL")
        writes.append(p)

        p = sub.add_parser("origin", help="record where the weights came from (a declared model is left alone)")
        p.add_argument("name", metavar="NAME")
        p.add_argument("--repo")
        p.add_argument("--revision")
        p.add_argument("--digest")
        p.add_argument("--fetched-at", dest="fetched_at")
        writes.append(p)

        reads.append(sub.add_parser("skipped", help="stored models skipped at load, and why"))
        reads.append(sub.add_parser("sources", help="weights sources and the models that load them"))

        for p in reads + writes:
            self.add_json_argument(p)
        for p in writes:
            self.add_actor_argument(p)

    def handle(self, *args, **options):
        action = options["action"]
        getattr(self, "do_" + action)(options)

    # -- reads --------------------------------------------------------------

    def do_list(self, options):
        state = selectors.in_force()
        models = selectors.list_models(state, kind=options["kind"], cls=options["cls"], owner=options["owner"],
                                       engine=options["engine"], q=options["q"])
        items = [selectors.model_item(state, m) for m in models]
        if options["as_json"]:
            self.print_json(items)
            return
        rows = [[m["name"], m["kind"], m["effective_class"], m.get("engine") or "-", m.get("owner") or "shared",
                 _replicas(m), str(len(m["warnings"]))] for m in items]
        self.print_table(["NAME", "KIND", "CLASS", "ENGINE", "OWNER", "REPLICAS", "WARNINGS"], rows,
                         empty="no models match")

    def do_show(self, options):
        state = selectors.in_force()
        model = state.catalog.resolve(options["name"])
        if model is None:
            raise CommandError(f"refused: no model or alias {options['name']!r} in the catalog")
        item = {**selectors.model_item(state, model), "used_by": state.catalog.used_by(model["name"])}
        self.print_data(item, options)

    def do_skipped(self, options):
        skipped = [s._asdict() for s in selectors.in_force().catalog.skipped]
        if options["as_json"]:
            self.print_json(skipped)
            return
        self.print_table(["NAME", "KIND", "REASON"], [[s["name"], s["kind"], s["reason"]] for s in skipped],
                         empty="no models were skipped")

    def do_sources(self, options):
        sources = [{"source": src, "models": names} for src, names in selectors.in_force().catalog.sources().items()]
        if options["as_json"]:
            self.print_json(sources)
            return
        self.print_table(["SOURCE", "MODELS"], [[s["source"], ", ".join(s["models"])] for s in sources],
                         empty="no weights sources")

    # -- writes -------------------------------------------------------------

    def _print_model(self, model: dict | None, options) -> None:
        item = selectors.model_item(selectors.in_force(), model)
        self.print_data(item, options)

    def do_add(self, options):
        definition = self.read_document(options["file"], options)
        subject = definition.get("name") if isinstance(definition, dict) else None
        with refusals(subject):
            model = services.add_model(definition=definition, by=self.actor(options))
        self._print_model(model, options)

    def do_remove(self, options):
        name = options["name"]
        with refusals(name):
            services.remove_model(name=name, by=self.actor(options))
        self.stdout.write(f"removed {name}")

    def _update(self, options, service, **kwargs):
        name = options["name"]
        with refusals(name):
            model = service(name=name, by=self.actor(options), **kwargs)
        self._print_model(model, options)

    def do_scale(self, options):
        self._update(options, services.scale_model, min=options["min_replicas"], max=options["max_replicas"])

    def do_resources(self, options):
        self._update(options, services.set_resources, profile=options["profile"] or None,
                     min_memory_gb=options["memory_gb"], cpu_cores=options["cpu_cores"])

    def do_class(self, options):
        value = "" if options["value"].lower() in NO_CLASS else options["value"]
        self._update(options, services.set_class, cls=value)

    def do_owner(self, options):
        value = "" if options["value"].lower() in SHARED_OWNER else options["value"]
        self._update(options, services.set_owner, owner=value)

    def do_adapters(self, options):
        adapters = self.read_document(options["file"], options)
        if adapters is None:
            adapters = []
        self._update(options, services.set_adapters, adapters=adapters)

    def do_source(self, options):
        origin = _origin(options, "origin_repo", "origin_revision", "origin_digest", "origin_fetched_at")
        self._update(options, services.set_source, source=options["source"], origin=origin)

    def do_canary(self, options):
        if options["clear"]:
            if options["model"] or options["percent"] is not None:
                raise CommandError("refused: --clear takes no MODEL or --percent")
            canary = None
        elif not options["model"] or options["percent"] is None:
            raise CommandError("refused: give MODEL and --percent N, or --clear")
        else:
            canary = {"model": options["model"], "percent": options["percent"]}
        self._update(options, services.set_canary, canary=canary)

    def do_eval(self, options):
        if options["clear"]:
            if options["suite"] is not None or options["min_score"] is not None:
                raise CommandError("refused: --clear takes no --suite or --min-score")
            gate = None
        elif options["suite"] is None or options["min_score"] is None:
            raise CommandError("refused: give --suite S and --min-score X, or --clear")
        else:
            gate = {"suite": options["suite"], "min_score": options["min_score"]}
        self._update(options, services.set_eval, gate=gate)

    def do_fallbacks(self, options):
        self._update(options, services.set_fallbacks, fallbacks=list(options["models"]))

    def do_origin(self, options):
        name = options["name"]
        origin = _origin(options, "repo", "revision", "digest", "fetched_at")
        if origin is None:
            raise CommandError("refused: give at least one of --repo, --revision, --digest, --fetched-at")
        with refusals(name):
            model = services.set_origin(name=name, origin=origin, by=self.actor(options))
        if model is None:
            # Not a refusal: the service leaves a declared model alone on
            # purpose, so a script recording origins for every model goes on.
            self.stderr.write(f"model {name!r} is declared in the cluster settings; its origin is not recorded")
            if options["as_json"]:
                self.print_json(None)
            return
        self._print_model(model, options)


def _replicas(model: dict) -> str:
    scaling = model.get("scaling")
    if not scaling:
        return "-"
    return f"{scaling.get('min')}-{scaling.get('max')}"


def _origin(options, repo: str, revision: str, digest: str, fetched_at: str) -> dict | None:
    origin = {key: options[option] for key, option in
              (("repo", repo), ("revision", revision), ("digest", digest), ("fetched_at", fetched_at))
              if options[option] is not None}
    return origin or None
