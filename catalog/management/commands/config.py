"""``manage.py config``: the cluster settings document, the counterpart of ``llmgw ctl config``.

Every write names the version it is based on: ``--base N``, or else the
newest version read just before the write. Either way the service compares
and sets, so a write that lands in between is refused rather than silently
undone. Every write prints the new version and what it does to the catalog.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import yaml
from django.core.management.base import CommandError

from ... import selectors, settings_file
from ...builder import CatalogError
from ...builder.settings import (
    SettingsKeyError,
    diff_documents,
    file_problems,
    get_key,
    mask_secrets,
    split_keys,
    with_baseline_guard,
)
from ...models import SettingsVersion
from ...services import settings as services
from ...services.errors import Conflict
from ..cli import LlmgwCommand, iso, one_line, parse_document, refusals, shorten

DEFAULT_EDITOR = "vi"
EDIT_HEADER = ("# llmgw cluster settings, based on version {number}.\n"
               "# Save and quit to see what the change does before it is saved; "
               "quit without saving to change nothing.\n")


class Command(LlmgwCommand):
    help = "Show, change, edit, roll back and import the cluster settings (a versioned document)."

    def add_arguments(self, parser):
        sub = self.subcommands(parser)
        reads, writes, asks = [], [], []

        reads.append(sub.add_parser("show", help="the settings in force as YAML, then any warnings on stderr"))

        p = sub.add_parser("get", help="the value of one dotted key (defaults.scaling.max, models.0.name)")
        p.add_argument("key", metavar="KEY")
        reads.append(p)

        p = sub.add_parser("set", help="set a dotted key to a value given as YAML ('[vllm, sglang]', 4, text)")
        p.add_argument("key", metavar="KEY")
        p.add_argument("value", metavar="VALUE")
        writes.append(p)

        p = sub.add_parser("unset", help="remove a dotted key (a list item by its index)")
        p.add_argument("key", metavar="KEY")
        writes.append(p)

        p = sub.add_parser("edit", help="edit the whole document in $EDITOR (default vi), review the impact, save")
        writes.append(p)
        asks.append(p)

        p = sub.add_parser("history", help="the versions, newest first; N: one version; N --diff M: what changed "
                                           "from M to N, key by key")
        p.add_argument("number", nargs="?", type=int, metavar="N")
        p.add_argument("--diff", type=int, metavar="M", help="the version to compare N with")
        reads.append(p)

        p = sub.add_parser("rollback", help="save version N's content as a new version (shows the impact first)")
        p.add_argument("number", type=int, metavar="N")
        writes.append(p)
        asks.append(p)

        p = sub.add_parser("import", help="save a settings file's cluster keys as a new version "
                                          "(shows the impact first)")
        p.add_argument("file", metavar="FILE")
        writes.append(p)
        asks.append(p)

        for p in reads + writes:
            self.add_json_argument(p)
        for p in writes:
            self.add_actor_argument(p)
            p.add_argument("--comment", default="", metavar="TEXT", help="why, kept in the history")
            p.add_argument("--base", type=int, metavar="N",
                           help="the version this change is based on; refused if a newer one exists "
                                "(default: the newest version, read just before writing)")
        for p in asks:
            self.add_yes_argument(p)

    def handle(self, *args, **options):
        try:
            getattr(self, "do_" + options["action"])(options)
        except settings_file.SettingsFileError as exc:
            raise CommandError(f"refused: {one_line(exc)}") from None

    # -- reads --------------------------------------------------------------

    def do_show(self, options):
        view = selectors.settings_view()
        if options["as_json"]:
            self.print_json(view)
        else:
            self.stdout.write(f"# cluster settings version {view['version']}, in force")
            if view["newest_version"] != view["version"]:
                self.stdout.write(f"# version {view['newest_version']} is newer but does not load (see the warnings)")
            self.print_yaml(view["document"])
        for warning in view["warnings"]:
            self.stderr.write(f"warning: {one_line(warning)}")

    def do_get(self, options):
        settings = selectors.settings_in_force()
        key = options["key"]
        try:
            value = get_key(mask_secrets(settings.document), key)
        except SettingsKeyError as exc:
            raise CommandError(f"refused: {one_line(exc)} in settings version {settings.version}") from None
        if options["as_json"]:
            self.print_json({"key": key, "value": value, "version": settings.version})
        else:
            self.stdout.write(_yaml(value), ending="")

    def do_history(self, options):
        number, other = options["number"], options["diff"]
        if number is None:
            if other is not None:
                raise CommandError("refused: --diff M compares with a version: give it, as in history N --diff M")
            self._history_list(options)
            return
        version = _version(number)
        item = _version_item(version)
        if other is not None:
            base = _version(other)
            before = mask_secrets(base.document) if isinstance(base.document, dict) else {}
            after = item["document"] if isinstance(item["document"], dict) else {}
            item["diff"] = {"base": base.number, "changes": diff_documents(before, after)}
        if options["as_json"]:
            self.print_json(item)
            return
        self.stdout.write(_version_line(item))
        if other is None:
            self.print_yaml(item["document"])
            return
        changes = item["diff"]["changes"]
        if not changes:
            self.stdout.write(f"no differences from version {other}")
        else:
            self.stdout.write(f"changes from version {other}:")
            for line in _change_lines(changes):
                self.stdout.write(line)

    def _history_list(self, options):
        in_force = selectors.settings_in_force()
        not_loading = {n for n, _reason in in_force.passed_over}
        items = []
        for version in SettingsVersion.objects.defer("document").order_by("-number"):
            item = _version_item(version, with_document=False)
            item["in_force"] = version.number == in_force.version
            item["loads"] = version.number not in not_loading
            items.append(item)
        if options["as_json"]:
            self.print_json(items)
            return
        rows = [[str(i["number"]), i["author"], _time(i["created_at"]),
                 "in force" if i["in_force"] else ("does not load" if not i["loads"] else ""),
                 shorten(i["comment"], 60) or "-"] for i in items]
        self.print_table(["VERSION", "AUTHOR", "TIME", "STATE", "COMMENT"], rows, empty="no settings versions yet")

    # -- writes -------------------------------------------------------------

    def do_set(self, options):
        key = options["key"]
        value = _parse_value(key, options["value"])
        self._write(options, lambda base, by: services.set_setting(
            key=key, value=value, base_version=base, by=by, comment=options["comment"]))

    def do_unset(self, options):
        key = options["key"]
        self._write(options, lambda base, by: services.unset_setting(
            key=key, base_version=base, by=by, comment=options["comment"]))

    def do_edit(self, options):
        base = self._base(options)
        current = _version(base)
        original = mask_secrets(current.document) if isinstance(current.document, dict) else current.document
        path = _edit_in_editor(EDIT_HEADER.format(number=base) + _yaml(original))

        def kept(line: str) -> CommandError:
            return CommandError(f"{line} (your edit is kept in {path})")

        text = Path(path).read_text(encoding="utf-8")
        if not "".join(line for line in text.splitlines() if not line.lstrip().startswith("#")).strip():
            Path(path).unlink(missing_ok=True)
            self.stdout.write("the file was emptied: nothing saved")
            return
        try:
            document = parse_document(text, "the edited document")
        except CommandError as exc:
            raise kept(str(exc)) from None
        if document == original:
            Path(path).unlink(missing_ok=True)
            self._no_change(options, current)
            return
        try:
            saved = self._preview_and_write(
                options, base, document,
                lambda by: services.replace_settings(document=document, base_version=base, by=by,
                                                     comment=options["comment"] or "edited with manage.py config edit"))
        except CommandError as exc:
            raise kept(str(exc)) from None
        if saved:
            Path(path).unlink(missing_ok=True)
        else:
            self.stdout.write(f"your edit is kept in {path}")

    def do_rollback(self, options):
        number = options["number"]
        base = self._base(options)
        old = _version(number)
        current = _version(base)
        if old.document == current.document:
            self._no_change(options, current, f"version {number} has the same content as version {base}")
            return
        self._preview_and_write(
            options, base, old.document,
            lambda by: services.rollback_settings(version=number, base_version=base, by=by,
                                                  comment=options["comment"]),
            heading=f"roll back to the content of version {number}")

    def do_import(self, options):
        path = options["file"]
        if not Path(path).is_file():
            raise CommandError(f"refused: {path}: no such settings file")
        data = settings_file.read(path)
        with refusals():
            problems = file_problems(data)
            if problems:
                raise CatalogError(problems)
        cluster, _machine = split_keys(data)
        document = with_baseline_guard(cluster)
        base = self._base(options)
        current = _version(base)
        if document == current.document:
            self._no_change(options, current, f"the cluster keys of {path} are those of version {base}")
            return
        self._preview_and_write(
            options, base, document,
            lambda by: services.import_settings_file(path=path, base_version=base, by=by,
                                                     comment=options["comment"]),
            heading=f"import the cluster keys of {path}")

    def _base(self, options) -> int:
        """--base N, or the newest version: what the write is compared with."""
        newest = _newest_number()
        if newest is None:
            raise CommandError("refused: there are no settings versions yet")
        base = options["base"]
        if base is None:
            return newest
        if base != newest:
            # Refused before the editor opens or the question is asked, not
            # after; the service compares again when it writes.
            if not SettingsVersion.objects.filter(number=base).exists():
                raise CommandError(f"refused: --base {base}: no settings version {base} (the newest is {newest})")
            raise CommandError(_stale_line(base, newest))
        return base

    def _write(self, options, write) -> None:
        base = self._base(options)
        with _compare_and_set(base):
            result = write(base, self.actor(options))
        self._print_write(result, options)

    def _preview_and_write(self, options, base: int, document, write, heading: str = "") -> bool:
        """Validate, show the changes and their impact, ask, write.
        True when saved."""
        with _compare_and_set(base):
            preview = services.preview_settings(document=document, base_version=base)
        current = _version(base)
        before = mask_secrets(current.document) if isinstance(current.document, dict) else {}
        out = self.stderr if options["as_json"] else self.stdout
        if heading:
            out.write(f"{heading}:")
        out.write(f"changes from version {base}:")
        for line in _change_lines(diff_documents(before, preview.document)) or ["  (no key changes)"]:
            out.write(line)
        out.write("impact on the catalog:")
        for line in _impact_lines(preview.impact):
            out.write(line)
        if not self.confirm(f"Save as version {base + 1}?", options):
            self.stdout.write("not saved")
            return False
        with _compare_and_set(base):
            result = write(self.actor(options))
        self._print_write(result, options, impact_shown=True)
        return True

    def _print_write(self, result, options, impact_shown: bool = False) -> None:
        if options["as_json"]:
            self.print_json({"version": result.version, "document": result.document, "impact": result.impact})
            return
        self.stdout.write(f"saved settings version {result.version}")
        if not impact_shown:
            for line in _impact_lines(result.impact):
                self.stdout.write(line)

    def _no_change(self, options, current: SettingsVersion, why: str = "") -> None:
        """Nothing to save: a version with the same content would only
        make the history longer."""
        if options["as_json"]:
            document = mask_secrets(current.document) if isinstance(current.document, dict) else current.document
            self.print_json({"version": current.number, "document": document, "impact": None})
            return
        self.stdout.write(f"no change{': ' + why if why else ''}; nothing saved")


# -- helpers -------------------------------------------------------------------

def _newest_number() -> int | None:
    selectors.settings_in_force()  # an empty store imports the settings file first
    return SettingsVersion.objects.order_by("-number").values_list("number", flat=True).first()


@contextmanager
def _compare_and_set(base: int):
    """The service's refusals as one line; a write that lost the race
    says which version won and how to see what it changed."""
    with refusals():
        try:
            yield
        except Conflict:
            newest = _newest_number()
            if newest is not None and newest != base:
                raise CommandError(_stale_line(base, newest)) from None
            raise


def _stale_line(base: int, newest: int | None) -> str:
    return (f"refused: the settings changed since version {base}: version {newest} is the newest; "
            f"see what changed with `manage.py config history {newest} --diff {base}`, then write again "
            f"(--base {newest})")


def _version(number: int) -> SettingsVersion:
    version = SettingsVersion.objects.filter(number=number).first()
    if version is None:
        raise CommandError(f"refused: no settings version {number}")
    return version


def _version_item(version: SettingsVersion, *, with_document: bool = True) -> dict:
    item = selectors.settings_version_item(version, with_document=with_document)
    item["created_at"] = iso(item["created_at"])
    return item


def _version_line(item: dict) -> str:
    comment = f": {one_line(item['comment'])}" if item["comment"] else ""
    return f"version {item['number']} by {item['author']} at {_time(item['created_at'])}{comment}"


def _time(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "-"


def _yaml(value) -> str:
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
    # A lone scalar gets YAML's end-of-document marker; a script wants the value.
    return text[:-4] if text.endswith("\n...\n") else text


def _parse_value(key: str, text: str):
    """VALUE as YAML, so numbers, lists and mappings need no JSON quoting."""
    return parse_document(text, f"{key}: the value")


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _change_lines(changes: list[dict]) -> list[str]:
    lines = []
    for change in changes:
        key = change["key"]
        if change["change"] == "added":
            lines.append(f"  + {key}: {_compact(change['after'])}")
        elif change["change"] == "removed":
            lines.append(f"  - {key}: {_compact(change['before'])}")
        else:
            lines.append(f"  ~ {key}: {_compact(change['before'])} -> {_compact(change['after'])}")
    return lines


def _impact_lines(impact: dict) -> list[str]:
    lines = []
    if impact["added"]:
        lines.append(f"  models added: {', '.join(impact['added'])}")
    if impact["removed"]:
        lines.append(f"  models removed: {', '.join(impact['removed'])}")
    if impact["changed"]:
        lines.append("  models changed: " + ", ".join(f"{c['name']} ({', '.join(c['fields'])})"
                                                      for c in impact["changed"]))
    for skipped in impact["skipped"]:
        lines.append(f"  {skipped['kind']} model {skipped['name']} is skipped (it will not load): "
                     f"{one_line(skipped['reason'])}")
    if impact["restored"]:
        lines.append(f"  skipped models that load again: {', '.join(impact['restored'])}")
    return lines or ["  no model changes"]


def _edit_in_editor(text: str) -> str:
    """Write ``text`` to a temporary file, open $EDITOR on it, return the
    file's path once the editor exits."""
    handle, path = tempfile.mkstemp(prefix="llmgw-settings-", suffix=".yaml")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text)
    editor = os.environ.get("EDITOR") or DEFAULT_EDITOR
    try:
        status = subprocess.call([*shlex.split(editor), path])
    except (OSError, ValueError) as exc:
        Path(path).unlink(missing_ok=True)
        raise CommandError(f"refused: cannot run the editor {editor!r} (set EDITOR): {one_line(exc)}") from None
    if status != 0:
        raise CommandError(f"refused: the editor {editor!r} exited with status {status}; nothing saved "
                           f"(your edit is kept in {path})")
    return path
