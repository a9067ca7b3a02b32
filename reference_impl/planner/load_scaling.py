"""PROPOSE, load-based: +1 when every engine is above the SLA, -1 when consolidation is safe.

Dynamo's SLA mode (``core/load_scaling.py``), per component: scale **up** to N+1 when ALL
engines' estimates exceed the SLA; scale **down** to N-1 (never below ``min_endpoint``) only when
ALL engines' estimates *after consolidation* (their load spread over N-1 engines) stay below
SLA x sensitivity — the consolidation guard that keeps a scale-down from being undone at the
next interval. Otherwise hold. Never more than one step: a bigger gap is closed over several
intervals, each after the previous change has completed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

UP = "all_above_sla"
DOWN = "consolidation_below_sla"
HOLD = "within_band"
NO_DATA = "no_observations"


@dataclass(frozen=True)
class LoadProposal:
    target: int
    reason: str


def decide(
    current: int,
    estimates: Sequence[float],
    consolidated: Sequence[float],
    sla: float,
    sensitivity: float,
    min_endpoint: int,
) -> LoadProposal:
    """The load-based target of one component with ``current`` workers."""
    if not estimates:
        return LoadProposal(current, NO_DATA)
    if all(e > sla for e in estimates):
        return LoadProposal(current + 1, UP)
    if current > min_endpoint and consolidated and all(c < sla * sensitivity for c in consolidated):
        return LoadProposal(current - 1, DOWN)
    return LoadProposal(current, HOLD)
