"""When a trial asks Ray for its memory (``_memory_request``'s rule), light to import: the cost
planner marks the cells whose trials will (``plan``), without loading torch."""

from __future__ import annotations


def asks_memory(trial_bytes: float, node_memory: float, trials_at_once: int) -> bool:
    """Whether a trial of ``trial_bytes`` asks for its memory: a node running
    ``trials_at_once`` such trials would not fit its ``node_memory``."""
    return trial_bytes * trials_at_once > node_memory
