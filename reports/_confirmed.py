"""The confirmed gains beside the search's: each pair's confirmation on fresh repeats
(``_confirm``; ``orthotune confirm`` stores it with ``store.save_confirmation``) joined to
the summary by its two winners, so ``best --json`` carries it and each verdict line ends
with it. A pair is matched to a confirmation only if both winners are the ones confirmed:
a search resumed since, whose winners changed, shows no confirmation for that pair."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from orthotune.reports._confirm import repeat_span
from orthotune.store import Store, read_confirmation

#: The columns :func:`with_confirmations` adds (``best --json`` carries them).
CONFIRM_COLUMNS = ("confirm_gain", "confirm_ci_low", "confirm_ci_high", "confirm_p", "confirm_p_holm",
                   "confirm_repeats", "confirm_looks", "confirm_design", "confirm_verdict")
#: The designs' names in words (``_sequential.BOUNDARIES``'s keys).
DESIGN_NAMES = {"pocock": "Pocock", "obrien-fleming": "O'Brien-Fleming", "bonferroni": "Bonferroni"}
_KEY = ("orig_search", "orig_trial_id", "ortho_search", "ortho_trial_id")


def with_confirmations(summary: pd.DataFrame, store: Store) -> pd.DataFrame:
    """``summary`` with :data:`CONFIRM_COLUMNS` and ``confirm_words`` (empty: not confirmed)."""
    searches = {s for column in ("orig_search", "ortho_search") if column in summary
                for s in summary[column].dropna().unique()}
    found: dict[tuple, dict[str, Any]] = {}
    for search in sorted(searches):
        document = read_confirmation(store, str(search))
        for pair in (document or {}).get("pairs", []):
            if isinstance(pair, dict):
                found[tuple(pair.get(k) for k in _KEY)] = {**pair, "design": document.get("design")}
    rows = [found.get(tuple(row.get(k) for k in _KEY)) for _, row in summary.iterrows()] if found else []
    columns = {c: [_column(pair, c) for pair in rows] if rows else [None] * len(summary) for c in CONFIRM_COLUMNS}
    columns["confirm_words"] = [confirmed_words(pair) for pair in rows] if rows else [""] * len(summary)
    return summary.assign(**columns)


def _column(pair: Mapping[str, Any] | None, column: str) -> Any:
    if pair is None:
        return None
    if column == "confirm_looks":
        return f"{pair.get('looks_taken')} of {len(pair.get('looks_planned') or [])}"
    return pair.get(column.removeprefix("confirm_"))


def confirmed_words(pair: Mapping[str, Any] | None) -> str:
    """``; confirmed on fresh splits 5-9 (Pocock, 2 of 2 looks): gain not significant (...)``."""
    if pair is None:
        return ""
    repeats = pair.get("repeats") or []
    named = DESIGN_NAMES.get(pair.get("design") or "", pair.get("design") or "an unknown design")
    looks = f"{pair.get('looks_taken')} of {len(pair.get('looks_planned') or [])} looks"
    return (f"; confirmed on fresh {pair.get('repeat_kind') or 'repeat'}s {repeat_span(repeats)} ({named}, {looks}): "
            f"{pair.get('verdict')}")
