"""The Settings screens: the layered view, the editor with its impact
preview, one key at a time, the history with diffs, and rollback.

Every write names the version its form was rendered from. When another
write landed first the service refuses (compare-and-set); the page then
shows what changed in between and keeps what the person typed, so nothing
they wrote is lost and nothing the other person wrote is silently undone.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render

from .. import selectors
from ..builder import CatalogError
from ..builder.rules import whole_number
from ..builder.settings import diff_documents, mask_secrets
from ..forms_settings import RollbackForm, SettingsDocumentForm, SettingsKeyForm, problem_line, yaml_text
from ..models import SettingsVersion
from ..roles import ADMIN
from ..services import settings as settings_services
from ..services.errors import Conflict, NotFound, Refusal
from .common import role_required

HISTORY_PAGE_SIZE = 50
# Where a write's outcome waits for the page it redirects to (POST, then
# redirect, then GET: reloading the page does not write again).
RESULT_KEY = "llmgw_settings_result"


def _shown(document: object) -> dict:
    return mask_secrets(document) if isinstance(document, dict) else {}


def _newest() -> SettingsVersion | None:
    return SettingsVersion.objects.order_by("-number").first()


def _diff_rows(changes: list[dict]) -> list[dict]:
    return [{**c, "before_text": yaml_text(c["before"]) if c["change"] != "added" else "",
             "after_text": yaml_text(c["after"]) if c["change"] != "removed" else ""} for c in changes]


def _conflict(base_version: int) -> dict:
    """What landed since the version a refused write was based on."""
    newest = _newest()
    base = SettingsVersion.objects.filter(number=base_version).first()
    changes = diff_documents(_shown(base.document) if base else {}, _shown(newest.document))
    return {"base": base_version, "newest": newest.number, "author": newest.author, "at": newest.created_at,
            "comment": newest.comment, "changes": _diff_rows(changes)}


def _rebased(form_class, request, newest: int):
    """The form as posted, now based on the newest version: saving it again
    is a deliberate choice made with the differences on screen."""
    data = request.POST.copy()
    data["base_version"] = str(newest)
    form = form_class(data)
    form.is_valid()
    return form


def _summary(value: object) -> str:
    """What a long value is, for its folded line: the models, not their first characters."""
    if isinstance(value, list):
        return f"{len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return f"{len(value)} key{'' if len(value) == 1 else 's'}"
    return "long value"


def _editor(newest: SettingsVersion) -> SettingsDocumentForm:
    return SettingsDocumentForm(initial={"document": yaml_text(_shown(newest.document)),
                                         "base_version": newest.number})


def _key_form(newest: SettingsVersion) -> SettingsKeyForm:
    return SettingsKeyForm(initial={"base_version": newest.number})


def _page_context(request, *, editor=None, key_form=None, **extra) -> dict:
    view = selectors.settings_view()
    newest = _newest()
    layers = [{**layer, "text": yaml_text(layer["value"]), "summary": _summary(layer["value"]),
               "differs": layer["ignored"] and layer["value"] != view["document"].get(layer["key"])}
              for layer in view["layers"]]
    context = {
        "view": view, "layers": layers, "newest": newest,
        "result": request.session.pop(RESULT_KEY, None) if request.method == "GET" else None,
        "editor": editor if editor is not None else _editor(newest),
        "key_form": key_form if key_form is not None else _key_form(newest),
        "editor_impact": None, "editor_conflict": None, "key_conflict": None,
    }
    context.update(extra)
    return context


@role_required(write=ADMIN)
def settings_page(request):
    if request.method != "GET":
        return redirect("settings")
    return render(request, "catalog/settings.html", _page_context(request))


def _remember(request, result, what: str) -> None:
    request.session[RESULT_KEY] = {"version": result.version, "what": what, "impact": result.impact}


@role_required(read=ADMIN, write=ADMIN)
def settings_preview(request):
    """The editor's Preview: validation and impact, nothing stored."""
    if request.method != "POST":
        return redirect("settings")
    form = SettingsDocumentForm(request.POST)
    impact = conflict = None
    if form.is_valid():
        try:
            impact = settings_services.preview_settings(document=form.cleaned_data["document"],
                                                        base_version=form.cleaned_data["base_version"]).impact
        except CatalogError as exc:
            form.add_catalog_error(exc)
        except Conflict:
            conflict = _conflict(form.cleaned_data["base_version"])
            form = _rebased(SettingsDocumentForm, request, conflict["newest"])
    context = {"editor": form, "editor_impact": impact, "editor_conflict": conflict, "previewed": True}
    if request.htmx:
        return render(request, "catalog/partials/_settings_editor.html", context)
    return render(request, "catalog/settings.html", _page_context(request, **context))


@role_required(read=ADMIN, write=ADMIN)
def settings_save(request):
    if request.method != "POST":
        return redirect("settings")
    form = SettingsDocumentForm(request.POST)
    status, conflict = 400, None
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = settings_services.replace_settings(document=data["document"], base_version=data["base_version"],
                                                        by=request.user.get_username(), comment=data["comment"])
        except CatalogError as exc:
            form.add_catalog_error(exc)
        except Conflict:
            status, conflict = 409, _conflict(data["base_version"])
            form = _rebased(SettingsDocumentForm, request, conflict["newest"])
        else:
            _remember(request, result, "the settings document")
            messages.success(request, f"Settings saved as version {result.version}.")
            return redirect("settings")
    context = _page_context(request, editor=form, editor_conflict=conflict)
    return render(request, "catalog/settings.html", context, status=status)


@role_required(read=ADMIN, write=ADMIN)
def settings_key(request):
    """Set or unset one dotted key."""
    if request.method != "POST":
        return redirect("settings")
    form = SettingsKeyForm(request.POST)
    status, conflict = 400, None
    if form.is_valid():
        data = form.cleaned_data
        by = request.user.get_username()
        try:
            if data["action"] == "set":
                result = settings_services.set_setting(key=data["key"], value=data["parsed_value"],
                                                       base_version=data["base_version"], by=by,
                                                       comment=data["comment"])
            else:
                result = settings_services.unset_setting(key=data["key"], base_version=data["base_version"], by=by,
                                                         comment=data["comment"])
        except CatalogError as exc:
            form.add_catalog_error(exc)
        except Conflict:
            status, conflict = 409, _conflict(data["base_version"])
            form = _rebased(SettingsKeyForm, request, conflict["newest"])
        except NotFound as exc:
            form.add_error("key", exc.message)
        else:
            verb = "set" if data["action"] == "set" else "unset"
            _remember(request, result, f"{data['key']} {verb}")
            messages.success(request, f"{data['key']} {verb}: settings version {result.version}.")
            return redirect("settings")
    context = _page_context(request, key_form=form, key_conflict=conflict)
    return render(request, "catalog/settings.html", context, status=status)


def _version_or_404(number) -> SettingsVersion:
    version = SettingsVersion.objects.filter(number=number).first()
    if version is None:
        raise Http404(f"no settings version {number}")
    return version


def _number(raw: str | None) -> int | None:
    return whole_number((raw or "").strip())


@role_required()
def settings_history(request):
    """Every version, newest first, and a key-level diff of any two."""
    versions = SettingsVersion.objects.defer("document").order_by("-number")
    page = Paginator(versions, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    newest = _newest()
    a, b = _number(request.GET.get("a")), _number(request.GET.get("b"))
    compare = error = None
    if "a" in request.GET or "b" in request.GET:
        old = SettingsVersion.objects.filter(number=a).first() if a else None
        new = SettingsVersion.objects.filter(number=b).first() if b else None
        if old is None or new is None:
            missing = [str(request.GET.get(k, "")) or "(none)" for k, v in (("a", old), ("b", new)) if v is None]
            error = f"no settings version {' or '.join(missing)}: pick two versions from the list"
        else:
            compare = {"a": old, "b": new,
                       "changes": _diff_rows(diff_documents(_shown(old.document), _shown(new.document)))}
    context = {"page": page, "newest": newest, "compare": compare, "compare_error": error,
               "a": a if a is not None else (newest.number - 1 if newest and newest.number > 1 else None),
               "b": b if b is not None else (newest.number if newest else None)}
    return render(request, "catalog/settings_history.html", context)


@role_required()
def settings_version(request, number):
    """One version's whole document."""
    version = _version_or_404(number)
    newest = _newest()
    return render(request, "catalog/settings_version.html",
                  {"version": version, "newest": newest, "text": yaml_text(_shown(version.document))})


def _rollback_context(version: SettingsVersion, newest: SettingsVersion) -> dict:
    """What rolling back would do, worked out before anyone confirms."""
    changes = _diff_rows(diff_documents(_shown(newest.document), _shown(version.document)))
    impact = problems = None
    try:
        impact = settings_services.preview_settings(document=version.document if isinstance(version.document, dict)
                                                    else {}, base_version=newest.number).impact
    except CatalogError as exc:
        problems = [problem_line(p.path, p.message) for p in exc.problems]
    except Refusal as exc:
        problems = [exc.message]
    return {"version": version, "newest": newest, "changes": changes, "impact": impact, "problems": problems}


@role_required(read=ADMIN, write=ADMIN)
def settings_rollback(request, number):
    version = _version_or_404(number)
    newest = _newest()
    if request.method != "POST":
        form = RollbackForm(initial={"base_version": newest.number, "comment": f"rollback to v{number}"})
        return render(request, "catalog/settings_rollback.html", {**_rollback_context(version, newest), "form": form})
    form = RollbackForm(request.POST)
    status, conflict = 400, None
    if form.is_valid():
        try:
            result = settings_services.rollback_settings(version=number, base_version=form.cleaned_data["base_version"],
                                                         by=request.user.get_username(),
                                                         comment=form.cleaned_data["comment"])
        except CatalogError as exc:
            for p in exc.problems:
                form.add_error(None, problem_line(p.path, p.message))
        except Conflict:
            status, conflict = 409, _conflict(form.cleaned_data["base_version"])
            newest = _newest()
            form = RollbackForm(initial={"base_version": newest.number, "comment": form.cleaned_data["comment"]})
        else:
            _remember(request, result, f"rollback to version {number}")
            messages.success(request, f"Rolled back to version {number}: settings version {result.version}.")
            return redirect("settings")
    context = {**_rollback_context(version, newest), "form": form, "conflict": conflict}
    return render(request, "catalog/settings_rollback.html", context, status=status)
