"""Recording the catalog in force as a new version when it changed."""

from __future__ import annotations

from django.db import transaction

from ..builder import Catalog
from ..models import CatalogVersion
from .locking import catalog_change


def record_version(catalog: Catalog, *, reason: str, by: str, settings_version: int | None) -> CatalogVersion | None:
    """A new CatalogVersion when the digest changed; None when it did not.

    Called inside the change's transaction, with the catalog lock held, so
    version numbers follow the order in which catalogs were put in force.
    """
    latest = CatalogVersion.objects.order_by("-version").only("version", "digest").first()
    document = catalog.document()
    if latest is not None and latest.digest == document.digest:
        return None
    # After commit only: a gateway must never be sent a version that a
    # rollback then takes back.
    transaction.on_commit(_publish)
    return CatalogVersion.objects.create(
        version=(latest.version + 1) if latest else 1,
        digest=document.digest,
        document=document.body.decode("utf-8"),
        reason=reason[:300],
        created_by=by or "system",
        settings_version=settings_version,
    )


def refresh_catalog(*, reason: str, by: str) -> CatalogVersion | None:
    """Rebuild the catalog in force from the database and record it if it
    changed: at first start, and when settings or a peer's offer changed."""
    from ..selectors import build_in_force, settings_in_force, stored_rows

    with catalog_change():
        state = build_in_force(settings_in_force(), stored_rows())
        return record_version(state.catalog, reason=reason, by=by, settings_version=state.settings.version)


def _publish() -> None:
    from ..longpoll import announce
    from .gateways import publish_latest

    latest = CatalogVersion.objects.order_by("-version").values_list("version", flat=True).first()
    announce(latest or 0)
    publish_latest()
