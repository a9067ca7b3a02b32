"""PROPOSE, load-based: +1 when every engine is above the SLA, -1 when consolidation is safe.

Dynamo's SLA mode (``core/load_scaling.py``), per component: scale **up** to N+1 when ALL
engines' estimates exceed the SLA; scale **down** to N-1 (never below ``min_endpoint``) only when
ALL engines' estimates *after consolidation* (their load spread over N-1 engines) stay below
SLA x sensitivity — the consolidation guard that keeps a scale-down from being undone at the
next interval. Otherwise hold. Never more than one step: a bigger gap is closed over several
intervals, each after the previous change has completed.

Aggregated mode (one worker set, ``decide_aggregated``): each engine has both estimates, and seed
003's rule is "Scale up if (ALL TTFT > SLA) OR (ALL ITL > SLA); scale down if (ALL TTFT < SLA *
sensitivity) AND (ALL ITL < SLA * sensitivity)": either signal adds a worker, and one is removed
only when both consolidated estimates allow it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

UP = "all_above_sla"
DOWN = "consolidation_below_sla"
HOLD = "within_band"
NO_DATA = "no_observations"
UP_TTFT = "all_ttft_above_sla"
UP_ITL = "all_itl_above_sla"


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


@dataclass(frozen=True)
class Signal:
    """One latency of every engine of a component: now, after consolidation, and its SLA."""

    estimates: Sequence[float]
    consolidated: Sequence[float]
    sla: float


def decide_aggregated(current: int, ttft: Signal, itl: Signal, sensitivity: float, min_endpoint: int) -> LoadProposal:
    """The load-based target of an aggregated worker set with ``current`` workers."""
    if not ttft.estimates and not itl.estimates:
        return LoadProposal(current, NO_DATA)
    if ttft.estimates and all(e > ttft.sla for e in ttft.estimates):
        return LoadProposal(current + 1, UP_TTFT)
    if itl.estimates and all(e > itl.sla for e in itl.estimates):
        return LoadProposal(current + 1, UP_ITL)
    both_low = all(
        signal.consolidated and all(c < signal.sla * sensitivity for c in signal.consolidated) for signal in (ttft, itl)
    )
    if current > min_endpoint and both_low:
        return LoadProposal(current - 1, DOWN)
    return LoadProposal(current, HOLD)
