"""Seed 001's Solution B (4.1.2) as a pure function: the next replica counts of a DGD's old and new worker sets.

Data flow::

    Situation (per worker component: target replicas, old/new desired and ready counts;
               new frontend ready?, paused?, maxSurge, maxUnavailable)
        -> next_step(situation)   Step: old/new desired counts to apply now, phase, reason
        -> weights.split(sum old ready, sum new ready)    the proxy's weights (traffic_split)

Rules, each a line of seed 001 or of the rollout issue:

* no new worker before the new frontend is ready (the new dynamo namespace must have its frontend);
  if it stops being ready mid-way, every count holds until it is back;
* paused holds every count where it is;
* per component, old + new desired never exceeds target + maxSurge, and old ready + new ready never
  falls below target - maxUnavailable because of a scale-down (a Deployment's two bounds);
* new workers are added as earlier ones become ready: at most maxSurge (at least one) of a
  component's new workers are on their way up at once;
* the prefill:decode ratio holds within one worker: on the new side (workers asked for) and on the
  old side (workers left), a component runs at most one worker ahead of the least advanced
  component's proportional share;
* the old side keeps a worker of every component until the new side has a ready worker of every
  component (a set missing one serves nothing: removing it first leaves no set able to serve),
  unless the strategy leaves no other move (e.g. maxSurge 0 at one replica: the outage is asked for);
* done when every component has its target of new ready workers and no old worker left.

"Ready" on the new side is the caller's: ``dgd_rollout`` counts a new worker only once the new
frontends have found it, so the old side's last worker never goes while they cannot yet route
to its replacement.

Why pure: the controller's loop (reconcile) reads counts from pods and applies the step; every
rule above is then unit-testable by simulating whole rollouts, and a restarted operator resumes
from counts alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

PROGRESSING, COMPLETE, PAUSED, WAITING_FOR_FRONTEND = "Progressing", "Complete", "Paused", "WaitingForFrontend"


@dataclass(frozen=True)
class Side:
    """Desired and ready workers of one component on one side (old or new)."""

    desired: int = 0
    ready: int = 0


@dataclass(frozen=True)
class Situation:
    target: Mapping[str, int]
    old: Mapping[str, Side]
    new: Mapping[str, Side]
    frontend_ready: bool = True
    paused: bool = False
    max_surge: int = 1
    max_unavailable: int = 0
    keep_ratio: bool = True
    """The prefill:decode ratio rule; False moves each component at its own pace (broken)."""

    def __post_init__(self) -> None:
        if self.max_surge < 0 or self.max_unavailable < 0 or self.max_surge + self.max_unavailable == 0:
            raise ValueError(f"maxSurge ({self.max_surge}) and maxUnavailable ({self.max_unavailable}) must be >= 0, not both 0")


@dataclass(frozen=True)
class Step:
    old: dict[str, int]
    new: dict[str, int]
    phase: str
    reason: str = ""
    changed: tuple[str, ...] = field(default=())


def _side(sides: Mapping[str, Side], name: str) -> Side:
    return sides.get(name, Side())


def _one_ahead_at_most(counts: Mapping[str, int], target: Mapping[str, int], name: str) -> bool:
    """``counts[name] + 1`` stays within one worker of the least advanced component's proportional share."""
    least = min((counts[c] / t for c, t in target.items() if t > 0), default=1.0)
    return counts[name] + 1 <= math.floor(least * target[name] + 1e-9) + 1


def _keeps_ratio(counts: Mapping[str, int], target: Mapping[str, int]) -> bool:
    """No component more than one worker above the least advanced one's proportional share of what remains."""
    least = min((counts[c] / t for c, t in target.items() if t > 0), default=0.0)
    return all(counts[c] <= math.floor(least * t + 1e-9) + 1 for c, t in target.items() if t > 0)


def _may_add(s: Situation, name: str, new: Mapping[str, int], old: Mapping[str, int]) -> bool:
    target, ready = s.target[name], _side(s.new, name).ready
    if new[name] >= target or new[name] - ready >= max(1, s.max_surge):
        return False  # NB: at most maxSurge (at least one) new workers on their way up at once
    if old[name] + new[name] + 1 > target + s.max_surge:
        return False
    return not s.keep_ratio or _one_ahead_at_most(new, s.target, name)


def _new_side_serves(s: Situation) -> bool:
    return all(_side(s.new, c).ready > 0 for c, t in s.target.items() if t > 0)


def _may_remove(s: Situation, name: str, new: Mapping[str, int], old: Mapping[str, int], keep_last: bool = True) -> bool:
    """One old worker may go: capacity stays >= target - maxUnavailable, and the old side keeps the ratio of what it has left."""
    target = s.target[name]
    old_side, new_side = _side(s.old, name), _side(s.new, name)
    if old[name] == 0 or old[name] - 1 + new[name] < target - s.max_unavailable:
        return False
    if keep_last and old[name] == 1 and not _new_side_serves(s):
        return False  # NB: at 2:2 with maxUnavailable 1, the last old prefill stays until a new decode is ready too
    if s.keep_ratio and not _keeps_ratio({**old, name: old[name] - 1}, s.target):
        return False  # NB: e.g. at 4:2, the last old decode stays while two old prefill do: they serve nothing without it
    if old_side.desired > old_side.ready:
        return True  # NB: an old worker that is not ready goes first; availability is unchanged
    return old_side.ready - 1 + new_side.ready >= target - s.max_unavailable


def next_step(s: Situation) -> Step:
    old = {c: _side(s.old, c).desired for c in s.target}
    new = {c: _side(s.new, c).desired for c in s.target}
    if s.paused:
        return Step(old, new, PAUSED, "spec.rolloutStrategy.paused is true: every count holds")
    if not s.frontend_ready:
        return Step(old, new, WAITING_FOR_FRONTEND, "the new frontend is not ready: no new worker is added, none removed")
    done = all(_side(s.new, c).ready >= t and old[c] == 0 for c, t in s.target.items())
    if done:
        return Step(old, new, COMPLETE, "every component runs its target of new ready workers; no old worker left")
    changed = _moves(s, old, new, keep_last=True)
    on_the_way = any(new[c] > _side(s.new, c).ready for c in s.target)
    if not changed and not on_the_way:
        changed = _moves(s, old, new, keep_last=False)  # NB: the strategy leaves no way without an outage
    reason = ", ".join(changed) if changed else "waiting for new workers to become ready"
    return Step(old, new, PROGRESSING, reason, tuple(changed))


def _moves(s: Situation, old: dict[str, int], new: dict[str, int], keep_last: bool) -> list[str]:
    """Adds, then removals, applied to ``old`` and ``new`` in place; returns what changed."""
    changed: list[str] = []
    for name in sorted(s.target, key=lambda c: (new[c] / s.target[c] if s.target[c] else 1.0, c)):
        while _may_add(s, name, new, old):
            new[name] += 1
            changed.append(f"{name} new +1")
    for name in sorted(s.target):
        if _may_remove(s, name, new, old, keep_last):
            old[name] -= 1
            changed.append(f"{name} old -1")
    return changed
