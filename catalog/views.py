"""Console views: each renders its page, or for htmx its partial."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from . import selectors


@login_required
def models_page(request):
    state = selectors.in_force()
    models = selectors.list_models(state, q=request.GET.get("q") or None)
    items = [selectors.model_item(state, m) for m in models]
    context = {"models": items, "skipped": state.catalog.skipped, "q": request.GET.get("q", ""),
               "settings_version": state.settings.version}
    return render(request, "catalog/models.html", context)
