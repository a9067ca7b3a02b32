"""Seed 001 4.3: the traffic share of the new frontend follows the share of ready workers.

``weight_new = new_ready / (old_ready + new_ready)``, expressed as HAProxy server weights
(integers 0..256, relative to each other). Nothing ready on either side keeps everything on the
old frontend: that is where the service was, and a new side with no ready worker cannot serve.
"""

from __future__ import annotations

MAX_WEIGHT = 256
"""HAProxy's largest server weight."""


def split(old_ready: int, new_ready: int) -> tuple[int, int]:
    """(old weight, new weight) for these ready worker counts."""
    if old_ready < 0 or new_ready < 0:
        raise ValueError(f"ready counts must be >= 0, got old={old_ready} new={new_ready}")
    total = old_ready + new_ready
    if total == 0:
        return MAX_WEIGHT, 0
    new = round(MAX_WEIGHT * new_ready / total)
    return MAX_WEIGHT - new, new


def share(old_weight: int, new_weight: int) -> float:
    """The fraction of new requests the new side gets with these weights."""
    total = old_weight + new_weight
    return new_weight / total if total else 0.0
