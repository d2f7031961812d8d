"""Confirmations on fresh repeats (``orthotune confirm``): one JSON document per search,
``confirmations/SEARCH.json`` beside the search's record, so the report and ``best`` read the
confirmed gain next to the search's. A missing one is None; an unreadable one is warned
about once and read as missing (the search's own verdicts stand without it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orthotune.store._names import check_search_name

if TYPE_CHECKING:
    from orthotune.store._store import Store

#: The store's folder of confirmation documents.
CONFIRMATIONS = "confirmations"


def confirmation_path(search: str) -> str:
    """The document of ``search``'s confirmation, relative to the store's root."""
    return f"{CONFIRMATIONS}/{check_search_name(search)}.json"


def read_confirmation(store: Store, search: str) -> dict[str, Any] | None:
    """``search``'s confirmation document, or None where there is none (or it cannot be read)."""
    relative = confirmation_path(search)
    if not store.exists(relative):
        return None
    try:
        value = store.read_json(relative)
    except (ValueError, OSError) as error:
        store.warn_unreadable(store.path(relative), error)
        return None
    if not isinstance(value, dict):
        store.warn_unreadable(store.path(relative), "not a JSON object")
        return None
    return value


def save_confirmation(store: Store, search: str, document: dict[str, Any]) -> None:
    """Write ``search``'s confirmation (a later one replaces it: it retrains the same winners)."""
    store.write_json(confirmation_path(search), document)
