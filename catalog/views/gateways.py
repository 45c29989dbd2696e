"""The Gateways screen: where each gateway is, pushing to one now, and the
registry (add, remove).

The table refreshes itself every two seconds while a gateway is still
converging and stops once every enabled one has settled, so a page left
open does not poll a quiet cluster forever.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from .. import selectors
from ..forms_settings import GatewayForm
from ..models import Gateway
from ..roles import ADMIN, OPERATOR
from ..services import gateways as gateway_services
from ..services.errors import NotFound, Refusal
from .common import page_or_partial, role_required, saved

# States that change by themselves (a delivery is due or in flight): worth
# polling for. ``in_sync`` is done; ``rejected`` waits for a newer catalog
# version, which a person makes, so polling for it would only cost queries.
CONVERGING = ("behind", "failing", "never_seen")


def _shown(item: dict) -> dict:
    return {**item, "state_label": item["state"].replace("_", " ")}


def _table_context(error: str | None = None) -> dict:
    latest = selectors.latest_catalog_version()
    gateways = [_shown(selectors.gateway_item(g, latest)) for g in Gateway.objects.order_by("name")]
    enabled = [g for g in gateways if g["enabled"]]
    return {
        "gateways": gateways,
        "latest": latest,
        "in_sync": sum(1 for g in enabled if g["state"] == "in_sync"),
        "enabled_count": len(enabled),
        "polling": any(g["state"] in CONVERGING for g in enabled),
        "table_error": error,
    }


@role_required(write=ADMIN)
def gateways_page(request):
    if request.method != "GET":
        return redirect("gateways")
    context = {**_table_context(), "form": GatewayForm()}
    return page_or_partial(request, "catalog/gateways.html", "catalog/partials/_gateways_table.html", context)


@role_required(read=ADMIN, write=ADMIN)
def gateway_add(request):
    if request.method != "POST":
        return redirect("gateways")
    form = GatewayForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        gateway = form.submit(lambda: gateway_services.register_gateway(
            name=data["name"], url=data["url"], token=data["token"], enabled=data["enabled"],
            by=request.user.get_username()))
        if gateway is not None:
            messages.success(request, f"Gateway {gateway.name} added; the newest catalog is on its way to it.")
            return saved(request, reverse("gateways"))
    if request.htmx:
        return render(request, "catalog/partials/_gateway_add.html", {"form": form})
    return render(request, "catalog/gateways.html", {**_table_context(), "form": form}, status=400)


@role_required(read=OPERATOR, write=OPERATOR)
def gateway_push(request, name):
    """Deliver the newest catalog to one gateway now, whatever its backoff says."""
    if request.method != "POST":
        return redirect("gateways")
    error = None
    try:
        gateway_services.push_now(name=name, by=request.user.get_username())
    except Refusal as exc:
        error = exc.message
    if request.htmx:
        return render(request, "catalog/partials/_gateways_table.html", _table_context(error))
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Pushing the newest catalog to {name}.")
    return redirect("gateways")


@role_required(read=ADMIN, write=ADMIN)
def gateway_remove(request, name):
    gateway = Gateway.objects.filter(name=name).first()
    if gateway is None:
        messages.error(request, f"There is no gateway {name}.")
        return redirect("gateways")
    if request.method == "POST":
        try:
            gateway_services.remove_gateway(name=name, by=request.user.get_username())
        except NotFound as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Gateway {name} removed: it gets no more catalogs from this console.")
        return redirect("gateways")
    item = _shown(selectors.gateway_item(gateway, selectors.latest_catalog_version()))
    return render(request, "catalog/gateway_remove.html", {"gateway": item})
