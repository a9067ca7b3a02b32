"""Worker choice: KV-aware cost (Dynamo 1.6's formula), round-robin and random, behind one Protocol.

KV cost of a worker, in blocks (``isl`` prompt tokens, ``bs`` the block size):

    adjusted_prefill = max(0, isl/bs - overlap_score_credit * overlap_blocks)
    logit = prefill_load_scale * adjusted_prefill + decode_blocks + decode_active_request_weight * active_requests
    decode_blocks = floor(isl/bs) + blocks already active on the worker

On the decode leg of disaggregated serving there is no prefix credit and no prefill term: the
cost is the worker's active decode blocks. A preferred-topology multiplier (Dynamo's
``exp(-tanh(sum of matched weights))``) scales the cost. The lowest cost wins and ties are broken
at random; with a temperature > 0 the choice is drawn from a softmax over normalised costs.
The router's own ``Load`` bookkeeping counts blocks and requests it has in flight per worker.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from servecert.reference_impl.frontend.discovery import WorkerInfo


@dataclass(frozen=True)
class KvRouterConfig:
    overlap_score_credit: float = 1.0
    prefill_load_scale: float = 1.0
    decode_active_request_weight: float = 0.0
    temperature: float = 0.0


class Load:
    """Blocks and requests the router has in flight on each worker."""

    def __init__(self) -> None:
        self.blocks: dict[str, float] = {}
        self.requests: dict[str, int] = {}

    def start(self, engine_id: str, blocks: float) -> None:
        self.blocks[engine_id] = self.blocks.get(engine_id, 0.0) + blocks
        self.requests[engine_id] = self.requests.get(engine_id, 0) + 1

    def end(self, engine_id: str, blocks: float) -> None:
        self.blocks[engine_id] = max(0.0, self.blocks.get(engine_id, 0.0) - blocks)
        self.requests[engine_id] = max(0, self.requests.get(engine_id, 0) - 1)


class Policy(Protocol):
    def choose(
        self,
        workers: Sequence[WorkerInfo],
        isl: int,
        overlaps: Mapping[str, int],
        multipliers: Mapping[str, float],
        decode_leg: bool,
    ) -> WorkerInfo: ...


class KvPolicy:
    def __init__(self, load: Load, config: KvRouterConfig | None = None, rng: random.Random | None = None) -> None:
        self.load = load
        self.config = config or KvRouterConfig()
        self.rng = rng or random.Random()
        self.last_costs: dict[str, float] = {}

    def costs(
        self, workers: Sequence[WorkerInfo], isl: int, overlaps: Mapping[str, int], multipliers: Mapping[str, float], decode_leg: bool
    ) -> list[float]:
        cfg, blocks, reqs = self.config, self.load.blocks, self.load.requests
        out: list[float] = []
        for w in workers:
            bs = w.card.block_size
            active = blocks.get(w.engine_id, 0.0)
            if decode_leg:
                logit = active + cfg.decode_active_request_weight * reqs.get(w.engine_id, 0)
            else:
                prefill = max(0.0, isl / bs - cfg.overlap_score_credit * overlaps.get(w.engine_id, 0))
                active_requests = reqs.get(w.engine_id, 0)
                logit = cfg.prefill_load_scale * prefill + (isl // bs + active) + cfg.decode_active_request_weight * active_requests
            out.append(logit * multipliers.get(w.engine_id, 1.0))
        return out

    def choose(
        self, workers: Sequence[WorkerInfo], isl: int, overlaps: Mapping[str, int], multipliers: Mapping[str, float], decode_leg: bool
    ) -> WorkerInfo:
        costs = self.costs(workers, isl, overlaps, multipliers, decode_leg)
        if self.config.temperature > 0:
            return workers[_softmax_pick(costs, self.config.temperature, self.rng)]
        best = min(costs)
        ties = [i for i, c in enumerate(costs) if c == best]
        return workers[ties[0] if len(ties) == 1 else self.rng.choice(ties)]


def _softmax_pick(costs: Sequence[float], temperature: float, rng: random.Random) -> int:
    lo, hi = min(costs), max(costs)
    if hi == lo:
        return rng.randrange(len(costs))
    weights = [math.exp(-(c - lo) / ((hi - lo) * temperature)) for c in costs]
    return rng.choices(range(len(costs)), weights=weights)[0]


class RoundRobinPolicy:
    def __init__(self) -> None:
        self._counter = itertools.count()

    def choose(
        self, workers: Sequence[WorkerInfo], isl: int, overlaps: Mapping[str, int], multipliers: Mapping[str, float], decode_leg: bool
    ) -> WorkerInfo:
        ordered = sorted(workers, key=lambda w: w.engine_id)
        return ordered[next(self._counter) % len(ordered)]


class RandomPolicy:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()

    def choose(
        self, workers: Sequence[WorkerInfo], isl: int, overlaps: Mapping[str, int], multipliers: Mapping[str, float], decode_leg: bool
    ) -> WorkerInfo:
        return self.rng.choice(list(workers))


def make_policy(mode: str, load: Load, config: KvRouterConfig | None = None) -> Policy:
    if mode == "kv":
        return KvPolicy(load, config)
    if mode == "round-robin":
        return RoundRobinPolicy()
    if mode == "random":
        return RandomPolicy()
    raise ValueError(f"unknown router mode {mode!r}: use kv, round-robin or random")
