"""The Models screens: the table, a model's page with its operations, and adding one."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse

from .. import builder, selectors
from ..forms import OPERATIONS, ModelDocumentForm, ModelForm
from ..models import AuditEvent
from ..services import models as model_services
from ..services.errors import Refusal
from ..roles import OPERATOR
from .common import page_or_partial, role_required, saved

PAGE_SIZE = 50
FILTERS = ("kind", "class", "engine", "owner", "q")
# The order a model's fields are shown in, as in the schema (SPEC §2.2).
DETAIL_FIELDS = ("peer", "aliases", "description", "engine", "source", "origin", "adapters", "profiles", "scaling",
                 "class", "owner", "canary", "eval", "fallbacks")
SORT_COLUMNS = (("name", "Name"), ("kind", "Kind"), ("class", "Class"), ("engine", "Engine"), ("owner", "Owner"))


def model_url(name: str) -> str:
    return reverse("model", kwargs={"name": name})


@role_required()
def models_list(request):
    state = selectors.in_force()
    params = {key: request.GET.get(key, "").strip() for key in (*FILTERS, "sort")}
    models = selectors.list_models(state, kind=params["kind"] or None, cls=params["class"] or None,
                                   owner=params["owner"] or None, engine=params["engine"] or None,
                                   q=params["q"] or None)
    models = selectors.sort_models(state, models, params["sort"] or "name")
    page = Paginator(models, PAGE_SIZE).get_page(request.GET.get("page"))
    kept = {k: v for k, v in params.items() if v}
    context = {
        "page": page,
        "models": [selectors.model_item(state, m) for m in page.object_list],
        "params": params,
        "query": urlencode(kept),
        "query_without_sort": urlencode({k: v for k, v in kept.items() if k != "sort"}),
        "total": len(state.catalog),
        "skipped": state.catalog.skipped,
        "notices": state.catalog.notices,
        "kinds": selectors.KINDS,
        "sort_columns": SORT_COLUMNS,
        "classes": builder.CLASSES,
        "engines": state.settings.engines,
        "settings_version": state.settings.version,
    }
    response = page_or_partial(request, "catalog/models.html", "catalog/partials/_models_table.html", context)
    if request.htmx:
        # The address bar keeps only what is set, not every empty filter.
        page_number = request.GET.get("page")
        response["HX-Push-Url"] = "?" + urlencode({**kept, **({"page": page_number} if page_number else {})})
    return response


def _operation_forms(model: dict, data=None, failed: str | None = None) -> list:
    forms = []
    for op, form_class in OPERATIONS.items():
        if op == failed and data is not None:
            forms.append(form_class(data, model=model, prefix=op))
        else:
            forms.append(form_class(initial=form_class.initial_from(model), model=model, prefix=op))
    return forms


def _detail_context(request, name: str) -> dict:
    state = selectors.in_force()
    model = state.catalog.resolve(name)
    if model is None:
        raise Http404(f"no model or alias {name!r}")
    item = selectors.model_item(state, model)
    given = selectors.definition_as_given(state, model["name"]) if item["kind"] != "federated" else None
    fields = [{"key": k, "value": model[k], "default": given is not None and k not in given}
              for k in DETAIL_FIELDS if k in model]
    history = AuditEvent.objects.filter(object_type="model", object_id=model["name"])[:20]
    return {"model": item, "used_by": state.catalog.used_by(model["name"]), "fields": fields,
            "history": history, "alias": name if name != model["name"] else None,
            "editable": item["kind"] == "runtime"}


@role_required()
def model_detail(request, name):
    context = _detail_context(request, name)
    if context["alias"]:
        return redirect(model_url(context["model"]["name"]))
    if context["editable"]:
        context["operations"] = _operation_forms(context["model"])
    return render(request, "catalog/model_detail.html", context)


@role_required()
def model_operation(request, name, op):
    """One operation's form, posted: the model's page again with the change,
    or the form with the builder's errors on its fields."""
    form_class = OPERATIONS.get(op)
    if form_class is None:
        raise Http404(f"no operation {op!r}")
    context = _detail_context(request, name)
    model = context["model"]
    if request.method != "POST" or not context["editable"]:
        return redirect(model_url(model["name"]))
    form = form_class(request.POST, model=model, prefix=op)
    if form.is_valid() and form.submit(lambda: form.apply(by=request.user.get_username()), model["name"]):
        messages.success(request, f"{form.title} of {model['name']} saved.")
        return saved(request, model_url(model["name"]))
    if request.htmx:
        return render(request, "catalog/partials/_operation.html", {"form": form, "model": model})
    context["operations"] = [form if f.op == op else f for f in _operation_forms(model)]
    return render(request, "catalog/model_detail.html", context, status=400)


@role_required(read=OPERATOR)
def model_remove(request, name):
    """Remove a runtime model, after showing who depends on it."""
    context = _detail_context(request, name)
    model = context["model"]
    if not context["editable"]:
        return redirect(model_url(model["name"]))
    if request.method == "POST":
        try:
            model_services.remove_model(name=model["name"], by=request.user.get_username())
        except Refusal as exc:
            context["error"] = exc.message
            return render(request, "catalog/model_remove.html", context, status=409)
        messages.success(request, f"{model['name']} was removed.")
        return redirect("models")
    return render(request, "catalog/model_remove.html", context)


def _add_forms(request, data=None):
    settings = selectors.in_force().settings
    default_engine = settings.defaults.get("engine") or "vllm"
    mode = (data or request.GET).get("mode", "form")
    form = ModelForm(data if mode == "form" else None, engines=settings.engines, default_engine=default_engine)
    paste = ModelDocumentForm(data if mode == "yaml" else None)
    return mode, form, paste


def _checked(form) -> dict | None:
    """The model as it would be built, with every error on its field."""
    if not form.is_valid():
        return None
    definition = form.definition()
    return form.submit(lambda: model_services.preview_model(definition=definition), definition.get("name"))


@role_required(read=OPERATOR)
def model_add(request):
    if request.method == "POST":
        mode, form, paste = _add_forms(request, request.POST)
        active = form if mode == "form" else paste
        if active.is_valid():
            definition = active.definition()
            model = active.submit(lambda: model_services.add_model(definition=definition,
                                                                   by=request.user.get_username()),
                                  definition.get("name"))
            if model is not None:
                messages.success(request, f"{model['name']} was added.")
                return redirect(model_url(model["name"]))
        return render(request, "catalog/model_add.html", {"mode": mode, "form": form, "paste": paste}, status=400)
    mode, form, paste = _add_forms(request)
    return render(request, "catalog/model_add.html", {"mode": mode, "form": form, "paste": paste})


@role_required(read=OPERATOR)
def model_add_check(request):
    """Inline validation while typing: the errors of each field (swapped in
    beside the fields, so the one being typed in keeps its focus) and the
    model as it would run."""
    if request.method != "POST":
        return redirect("model-add")
    mode, form, paste = _add_forms(request, request.POST)
    active = form if mode == "form" else paste
    preview = _checked(active)
    for name in list(active.errors):
        if name in active.fields and not request.POST.get(active.add_prefix(name), "").strip():
            del active.errors[name]  # not typed in yet: "required" would only be noise
    return render(request, "catalog/partials/_add_check.html", {"form": active, "preview": preview, "mode": mode})
