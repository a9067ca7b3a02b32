"""Topology-aware KV-transfer routing: which decode workers may receive a prefill worker's KV.

Two designs are implemented, the first taking precedence when configured:

Seed 000 (frontend configuration ``DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL`` and
``DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY``, default fail), every row of its runtime table:
- level unset: no filtering at all, identical to routing without topology;
- decode candidates are the workers whose value at the level equals the prefill worker's;
  workers missing the level are excluded;
- none left: ``fail`` raises ``NoSameDomainDecode`` (the client gets an error naming the level
  and the prefill worker's value); ``fallback`` logs a warning, counts it, and allows every
  decode worker, those missing the level included (the router logs the warning, on its
  frontend's own logger, so an adapter can hand it to the suite);
- before prefill selection, prefill workers with at least one same-domain decode worker are
  preferred; when there are none, every prefill worker is eligible.

Dynamo 1.6 (per worker, read from the *prefill* worker's runtime config): ``required`` filters
decode workers to the prefill worker's ``kv_transfer_domain`` value; ``preferred`` keeps all but
multiplies the cost of matching ones by exp(-tanh(weight)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from servecert.reference_impl.frontend.discovery import WorkerInfo

FAIL = "fail"
FALLBACK = "fallback"
MISSING = "<missing>"


class NoSameDomainDecode(Exception):
    def __init__(self, level: str, value: str, prefill: str) -> None:
        super().__init__(
            f"no decode worker is available in {level}={value} (the {level} of prefill worker {prefill}); "
            f"KV-cache transfers must stay within one {level}, so the request was not served"
        )
        self.level, self.value, self.prefill = level, value, prefill


@dataclass(frozen=True)
class TopologyPolicy:
    level: str | None = None
    mismatch_policy: str = FAIL

    def __post_init__(self) -> None:
        if self.mismatch_policy not in (FAIL, FALLBACK):
            raise ValueError(f"mismatch policy must be fail or fallback, got {self.mismatch_policy!r}")


@dataclass
class DecodeChoice:
    """Decode candidates for one request, with cost multipliers and whether this was a fallback."""

    candidates: list[WorkerInfo]
    multipliers: dict[str, float] = field(default_factory=dict)
    fallback: bool = False


def eligible_prefill(policy: TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]) -> list[WorkerInfo]:
    """Prefer prefill workers with a same-domain decode worker (seed row 4); else all of them."""
    level = policy.level
    if level is None:
        return list(prefill)
    present = {d.domains[level] for d in decode if level in d.domains}
    preferred = [p for p in prefill if p.domains.get(level, MISSING) in present]
    return preferred or list(prefill)


def decode_candidates(policy: TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> DecodeChoice:
    if policy.level is not None:
        return _seed_filter(policy, prefill, decode)
    if prefill.topology_enabled and prefill.transfer_domain:
        return _dynamo_constraints(prefill, decode)
    return DecodeChoice(list(decode))


def _seed_filter(policy: TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> DecodeChoice:
    level = policy.level
    assert level is not None
    value = prefill.domains.get(level)
    same = [d for d in decode if value is not None and d.domains.get(level) == value]
    if same:
        return DecodeChoice(same)
    if policy.mismatch_policy == FAIL:
        raise NoSameDomainDecode(level, value or MISSING, prefill.engine_id)
    return DecodeChoice(list(decode), fallback=True)


def fallback_warning(level: str, prefill: WorkerInfo) -> str:
    """The warning the fallback row asks for: the level, the prefill worker's value there, and what was done."""
    value = prefill.domains.get(level, MISSING)
    return f"topology fallback: no decode worker in {level}={value} (prefill {prefill.engine_id}); routing to any decode worker"


def _dynamo_constraints(prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> DecodeChoice:
    domain = prefill.transfer_domain
    assert domain is not None
    value = prefill.domains.get(domain)
    if prefill.enforcement == "preferred":
        weight = prefill.preferred_weight or 0.0
        factor = math.exp(-math.tanh(weight))
        return DecodeChoice(list(decode), {d.engine_id: factor for d in decode if value is not None and d.domains.get(domain) == value})
    same = [d for d in decode if value is not None and d.domains.get(domain) == value]
    if not same:
        raise NoSameDomainDecode(domain, value or MISSING, prefill.engine_id)
    return DecodeChoice(same)
