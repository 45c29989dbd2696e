"""What every console view shares: roles, and rendering page or partial."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse

from ..roles import ADMIN, OPERATOR, VIEWER, has_role, role_of


def role_required(read: str = VIEWER, write: str = OPERATOR):
    """Any logged-in user with ``read`` may look; changing needs ``write``.

    What a role cannot do is not offered in the page, and refused here if
    it is posted anyway.
    """
    def decorate(view):
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            needed = read if request.method in ("GET", "HEAD", "OPTIONS") else write
            if not has_role(request.user, needed):
                return render(request, "catalog/forbidden.html", {"needed": needed}, status=403)
            return view(request, *args, **kwargs)
        return wrapped
    return decorate


# The console's sections, in the order of the navigation bar.
SECTIONS = (
    ("Models", "models"), ("Settings", "settings"), ("Gateways", "gateways"), ("Sources", "sources"),
    ("Catalog versions", "catalog-versions"), ("Federation", "federation"), ("Audit", "audit"), ("Tokens", "tokens"),
)


def _navigation(request) -> list[dict]:
    current = request.path
    items = []
    for label, url_name in SECTIONS:
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        items.append({"label": label, "url": url, "current": current.startswith(url)})
    return items


def roles(request) -> dict:
    """Template context: what the person may do, so pages offer only that."""
    user = getattr(request, "user", None)
    signed_in = user is not None and user.is_authenticated
    return {
        "role": role_of(user) if signed_in else None,
        "can_operate": signed_in and has_role(user, OPERATOR),
        "can_admin": signed_in and has_role(user, ADMIN),
        "console_nav": _navigation(request) if signed_in else [],
    }


def page_or_partial(request, template: str, partial: str, context: dict, status: int = 200):
    """The whole page, or for htmx the fragment it asked to swap."""
    if getattr(request, "htmx", False) and not request.htmx.boosted:
        return render(request, partial, context, status=status)
    return render(request, template, context, status=status)


def saved(request, url: str):
    """After a change posted from a form: htmx reloads the page it is on
    (it now shows the change), a plain form follows the redirect."""
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return redirect(url)
