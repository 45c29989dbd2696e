"""The reading screens — Sources, Catalog versions, Federation, Audit — and
the person's own API tokens."""

from __future__ import annotations

import json
from datetime import datetime, time
from datetime import timezone as dt_timezone
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from .. import builder, selectors
from ..builder.rules import whole_number
from ..forms_settings import TokenForm, yaml_text
from ..models import ApiToken, AuditEvent, CatalogVersion
from ..roles import ADMIN, OPERATOR, VIEWER, has_role
from ..services import users as user_services
from ..services.errors import NotFound
from ..services.federation import fetch_all_peers
from .common import role_required

SOURCES_PAGE_SIZE = 100
VERSIONS_PAGE_SIZE = 50
VERSION_MODELS_PAGE_SIZE = 100
AUDIT_PAGE_SIZE = 50


def _linked(state, names) -> list[dict]:
    """Model names with their kind, linked when the model is in force."""
    out = []
    for name in names:
        model = state.catalog.resolve(name)
        out.append({"name": name, "kind": state.kind(model) if model else None, "in_force": model is not None})
    return out


# --- Sources ----------------------------------------------------------------

@role_required()
def sources_page(request):
    state = selectors.in_force()
    q = request.GET.get("q", "").strip()
    sources = sorted(state.catalog.sources().items())
    if q:
        needle = q.lower()
        sources = [(src, names) for src, names in sources
                   if needle in src.lower() or any(needle in n.lower() for n in names)]
    page = Paginator(sources, SOURCES_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"source": src, "models": _linked(state, names)} for src, names in page.object_list]
    return render(request, "catalog/sources.html", {"page": page, "rows": rows, "q": q,
                                                    "query": urlencode({"q": q} if q else {})})


# --- Catalog versions -------------------------------------------------------

def _short(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]


@role_required()
def versions_page(request):
    versions = CatalogVersion.objects.defer("document").order_by("-version")
    page = Paginator(versions, VERSIONS_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"v": v, "short": _short(v.digest)} for v in page.object_list]
    return render(request, "catalog/versions.html", {"page": page, "rows": rows})


def _catalog_version_or_404(number: int) -> CatalogVersion:
    version = CatalogVersion.objects.filter(version=number).first()
    if version is None:
        raise Http404(f"no catalog version {number}")
    return version


def _models_of(version: CatalogVersion) -> list[dict]:
    try:
        models = json.loads(version.document)
    except ValueError:
        return []
    return [m for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)] \
        if isinstance(models, list) else []


@role_required()
def version_page(request, number):
    version = _catalog_version_or_404(number)
    models = _models_of(version)
    state = selectors.in_force()
    page = Paginator(models, VERSION_MODELS_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{**m, "effective_class": builder.effective_class(m) if "peer" not in m else "",
             "in_force": state.catalog.resolve(m["name"]) is not None} for m in page.object_list]
    raw = request.GET.get("diff", "").strip()
    diff = diff_error = None
    other = None
    if raw:
        number = whole_number(raw)
        other = CatalogVersion.objects.filter(version=number).first() if number is not None else None
        if other is None:
            diff_error = f"no catalog version {raw}: pick one from the list"
        else:
            result = builder.diff_models(_models_of(other), models)
            diff = {"base": other, "added": _linked(state, result["added"]),
                    "removed": _linked(state, result["removed"]),
                    "changed": [{**c, **_linked(state, [c["name"]])[0]} for c in result["changed"]]}
    default_other = other.version if other else (version.version - 1 if version.version > 1 else None)
    context = {"version": version, "short": _short(version.digest), "rows": rows, "page": page,
               "count": len(models), "diff": diff, "diff_error": diff_error, "diff_with": raw or default_other,
               "query": urlencode({"diff": raw} if raw else {})}
    return render(request, "catalog/versions_detail.html", context)


# --- Federation -------------------------------------------------------------

@role_required(write=OPERATOR)
def federation_page(request):
    if request.method != "GET":
        return redirect("federation")
    state = selectors.in_force()
    peers = selectors.peer_items()
    for peer in peers:
        peer["offered"] = _linked(state, peer["models"])  # already PEER/MODEL
    federation = state.settings.document.get("federation") or {}
    mode = federation.get("offer", "all") if isinstance(federation, dict) else "all"
    offer = selectors.offer(state)
    context = {"peers": peers, "notices": state.catalog.notices, "offer": offer, "offer_mode": mode,
               "skipped": [s for s in state.catalog.skipped if s.kind == "federated"],
               "settings_version": state.settings.version}
    return render(request, "catalog/federation.html", context)


@role_required(read=OPERATOR, write=OPERATOR)
def federation_fetch(request):
    if request.method == "POST":
        count = fetch_all_peers(force=True)
        failed = [p["name"] for p in selectors.peer_items() if p["last_error"]]
        if failed:
            messages.error(request, f"Fetched {count} peer(s); no fresh offer from {', '.join(failed)}: "
                                    "their last offers are kept.")
        else:
            messages.success(request, f"Fetched the offers of {count} peer(s).")
    return redirect("federation")


# --- Audit ------------------------------------------------------------------

def _since(raw: str):
    """A date (from its midnight, UTC) or a date and time."""
    moment = parse_datetime(raw)
    if moment is None:
        day = parse_date(raw)
        if day is None:
            raise ValueError
        moment = datetime.combine(day, time.min)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, dt_timezone.utc)
    return moment


@role_required()
def audit_page(request):
    params = {key: request.GET.get(key, "").strip() for key in ("actor", "object", "action", "since")}
    events = AuditEvent.objects.all()
    error = None
    if params["actor"]:
        events = events.filter(actor=params["actor"])
    if params["object"]:
        events = events.filter(object_id=params["object"])
    if params["action"]:
        # "model" finds every model.* action; "model.add" only that one.
        events = events.filter(action__startswith=params["action"])
    if params["since"]:
        try:
            events = events.filter(at__gte=_since(params["since"]))
        except (ValueError, OverflowError):
            error = f"since {params['since']!r} is not a date (YYYY-MM-DD) or a date and time (YYYY-MM-DDTHH:MM)"
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"e": e, "before": None if e.before is None else yaml_text(e.before),
             "after": None if e.after is None else yaml_text(e.after)} for e in page.object_list]
    kept = {k: v for k, v in params.items() if v}
    return render(request, "catalog/audit.html", {"page": page, "rows": rows, "params": params,
                                                  "query": urlencode(kept), "filter_error": error,
                                                  "filtered": bool(kept)})


# --- Tokens -----------------------------------------------------------------

def _tokens_context(request, form=None) -> dict:
    own = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    others = ApiToken.objects.exclude(user=request.user).select_related("user").order_by("-created_at") \
        if has_role(request.user, ADMIN) else None
    return {"tokens": own, "others": others, "form": form or TokenForm()}


@role_required(write=VIEWER)
def tokens_page(request):
    if request.method != "GET":
        return redirect("tokens")
    return render(request, "catalog/tokens.html", _tokens_context(request))


@role_required(write=VIEWER)
def token_create(request):
    """A new token for the person signed in. Its key is on this response
    and nowhere else: only its hash is kept."""
    if request.method != "POST":
        return redirect("tokens")
    form = TokenForm(request.POST)
    if not form.is_valid():
        return render(request, "catalog/tokens.html", _tokens_context(request, form), status=400)
    username = request.user.get_username()
    key = user_services.create_token(username=username, name=form.cleaned_data["name"], by=username)
    response = render(request, "catalog/token_created.html", {"key": key, "name": form.cleaned_data["name"],
                                                              "prefix": key[:12]})
    # Not kept by the browser or a proxy: the key must not come back from a cache.
    response["Cache-Control"] = "no-store"
    return response


@role_required(write=VIEWER)
def token_revoke(request, token_id):
    if request.method != "POST":
        return redirect("tokens")
    token = ApiToken.objects.filter(pk=token_id).select_related("user").first()
    if token is None:
        raise Http404(f"no token {token_id}")
    if token.user_id != request.user.pk and not has_role(request.user, ADMIN):
        return render(request, "catalog/forbidden.html", {"needed": ADMIN}, status=403)
    try:
        user_services.revoke_token(token_id=token.pk, by=request.user.get_username())
    except NotFound:
        messages.error(request, f"Token {token.prefix}… was already revoked.")
    else:
        owner = "" if token.user_id == request.user.pk else f" of {token.user.get_username()}"
        messages.success(request, f"Token {token.prefix}…{owner} revoked: it no longer works.")
    return redirect("tokens")
