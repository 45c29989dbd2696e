"""What every ``manage.py`` door shares: who is acting, how a refusal is
said, how files are read and how results are printed.

A command parses its arguments, calls a service and prints the answer. A
refusal is one line on stderr and a non-zero exit, never a traceback:
scripts test the exit status and people read the line.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from contextlib import contextmanager
from pathlib import Path

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ..builder import CatalogError
from ..services.errors import Refusal

# More problems than this on one line are unreadable; the count says the rest.
MAX_PROBLEMS_SHOWN = 5


def default_actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry (containers with an arbitrary uid)
        return "cli:unknown"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def iso(value) -> str | None:
    """A time as JSON carries it (ISO 8601), or None."""
    return value.isoformat() if value else None


def shorten(text: str, width: int) -> str:
    """One line of at most ``width`` characters, for a table cell."""
    text = one_line(text)
    return text if len(text) <= width else text[:width - 1] + "…"


def catalog_error_line(exc: CatalogError, subject: str | None = None) -> str:
    """Every problem with its field path, on one line. Problems of other
    models than the one being changed name that model."""
    parts = []
    for p in exc.problems[:MAX_PROBLEMS_SHOWN]:
        other = p.model and p.model != subject and not p.model.startswith("#")
        where = ": ".join(x for x in (f"model {p.model!r}" if other else "", p.path) if x)
        parts.append(f"{where}: {p.message}" if where else p.message)
    more = len(exc.problems) - MAX_PROBLEMS_SHOWN
    line = "; ".join(parts) or exc.summary()
    if more > 0:
        line += f" (and {more} more problem{'s' if more > 1 else ''})"
    return one_line(line)


@contextmanager
def refusals(subject: str | None = None):
    """Turn a service's refusal into the command's one-line refusal."""
    try:
        yield
    except CatalogError as exc:
        raise CommandError(f"refused: {catalog_error_line(exc, subject)}") from None
    except Refusal as exc:
        raise CommandError(f"refused: {one_line(exc.message)}") from None


class LlmgwCommand(BaseCommand):
    """A command whose refusals read as one line, without Django's
    ``CommandError:`` prefix, when run from a shell."""

    stealth_options = ("stdin",)
    _from_argv = False

    def run_from_argv(self, argv):
        self._from_argv = True
        super().run_from_argv(argv)

    def execute(self, *args, **options):
        # With no broker there is no worker to hand a delivery to, and the
        # console's background thread would die with this process: deliver
        # before the command returns.
        if settings.CELERY_TASK_ALWAYS_EAGER:
            settings.LLMGW_TASKS_INLINE = True
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if not self._from_argv or options.get("traceback"):
                raise
            self.stderr.write(one_line(exc))
            sys.exit(exc.returncode)

    # -- options ------------------------------------------------------------

    @staticmethod
    def subcommands(parser):
        """Subparsers that also accept Django's usual options after the
        action (``models list --traceback``), where people type them."""
        sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        add_parser = sub.add_parser

        def add(name, **kwargs):
            p = add_parser(name, **kwargs)
            # SUPPRESS: an option not repeated here keeps the value given before the action.
            p.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3], default=argparse.SUPPRESS,
                           help=argparse.SUPPRESS)
            p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            p.add_argument("--skip-checks", action="store_true", default=argparse.SUPPRESS,
                           help=argparse.SUPPRESS)
            return p

        sub.add_parser = add
        return sub

    @staticmethod
    def add_actor_argument(parser) -> None:
        parser.add_argument("--as", dest="actor", metavar="NAME",
                            help="who the audit log records as making the change (default: cli:<os user>)")

    @staticmethod
    def add_json_argument(parser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="print JSON")

    @staticmethod
    def actor(options) -> str:
        return options.get("actor") or default_actor()

    # -- input --------------------------------------------------------------

    def read_document(self, path: str, options) -> object:
        """A JSON or YAML document from a file, or from stdin for ``-``."""
        try:
            if path == "-":
                text = (options.get("stdin") or sys.stdin).read()
                where = "stdin"
            else:
                text = Path(path).read_text(encoding="utf-8")
                where = path
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"refused: cannot read {path}: {one_line(exc)}") from None
        return parse_document(text, where)

    def confirm(self, question: str, options) -> bool:
        """Ask on stdin unless ``--yes`` was given. A prompt with no answer
        (stdin closed, as in a script) is a refusal, not a no: a script
        that forgot ``--yes`` must not look as if it succeeded."""
        if options.get("yes"):
            return True
        # With --json, stdout carries only the JSON answer.
        out = self.stderr if options.get("as_json") else self.stdout
        out.write(f"{question} [y/N] ", ending="")
        out.flush()
        stdin = options.get("stdin") or sys.stdin
        answer = stdin.readline()
        if not (answer and getattr(stdin, "isatty", lambda: False)()):
            out.write("")  # the end of the prompt's line, which no typed Enter ended
        if not answer:
            raise CommandError("refused: no answer on stdin; give --yes to go ahead without asking")
        return answer.strip().lower() in ("y", "yes")

    @staticmethod
    def add_yes_argument(parser) -> None:
        parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    # -- output -------------------------------------------------------------

    def print_json(self, value) -> None:
        self.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str))

    def print_yaml(self, value) -> None:
        self.stdout.write(yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False),
                          ending="")

    def print_data(self, value, options) -> None:
        if options.get("as_json"):
            self.print_json(value)
        else:
            self.print_yaml(value)

    def print_table(self, headers: list[str], rows: list[list[str]], empty: str) -> None:
        if not rows:
            self.stdout.write(empty)
            return
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        for row in [headers, *rows]:
            self.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


class _NoDatesLoader(yaml.SafeLoader):
    """YAML without implicit timestamps: ``fetched_at: 2024-05-01`` must
    stay the string the schema asks for, not become a date object."""


_NoDatesLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_document(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.load(text, Loader=_NoDatesLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise CommandError(f"refused: {where} is neither JSON nor YAML: {one_line(exc)}") from None
