"""The router: from a model name and prompt tokens to the worker(s) that will serve them.

It joins the pieces: worker sets (which workers are routable, with which card), the KV index
(prefix overlap per worker), the load bookkeeping, the selection policy, and the topology
policy. Aggregated serving picks one worker; disaggregated serving (the model has prefill and
decode workers) picks a prefill worker first, among those the topology policy prefers, and,
once its KV exists, a decode worker among the candidates the topology policy allows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from servecert.protocol import tokenizer
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import WorkerInfo
from servecert.reference_impl.frontend.kv_index import KvIndex
from servecert.reference_impl.frontend.routing import KvRouterConfig, Load, make_policy
from servecert.reference_impl.frontend.worker_sets import WorkerSets


class NoWorkers(Exception):
    """No routable worker serves the model (none registered, or all rejected)."""


@dataclass(frozen=True)
class ModelWorkers:
    agg: list[WorkerInfo]
    prefill: list[WorkerInfo]
    decode: list[WorkerInfo]

    @property
    def disaggregated(self) -> bool:
        return bool(self.prefill) and bool(self.decode)

    def first_leg(self) -> list[WorkerInfo]:
        return self.prefill if self.disaggregated else (self.agg or self.decode)

    def context_length(self) -> int:
        return min(w.card.context_length for w in (*self.agg, *self.prefill, *self.decode))

    def tokenizer(self) -> tokenizer.Tokenizer:
        """The tokenizer the first leg's model card names (worker sets accept only known ones).

        Prefill workers without a decode worker have no first leg, yet the request is parsed before ``Router.first``
        refuses it (404): their card names the tokenizer then."""
        pool = self.first_leg() or self.prefill or self.decode
        return tokenizer.by_name(pool[0].card.tokenizer)


class Router:
    def __init__(
        self,
        sets: WorkerSets,
        index: KvIndex,
        mode: str = "kv",
        topology_policy: topology.TopologyPolicy | None = None,
        kv_config: KvRouterConfig | None = None,
        registry: CollectorRegistry | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.sets = sets
        self.log = log or logging.getLogger("servecert.frontend")
        self.index = index
        self.load = Load()
        self.policy = make_policy(mode, self.load, kv_config)
        self.topology = topology_policy or topology.TopologyPolicy()
        # The two topology rules, as attributes: a deliberately broken router (tests/nonconforming) swaps one.
        self.select_prefill = topology.eligible_prefill
        self.decode_candidates = topology.decode_candidates
        self.fallbacks = 0
        self._fallback_metric = Counter(
            "servecert_frontend_topology_fallbacks",
            "Requests routed across topology domains by the fallback policy",
            ["level"],
            registry=registry if registry is not None else CollectorRegistry(),
        )

    def workers(self, model: str) -> ModelWorkers:
        found = self.sets.for_model(model)
        if not found:
            raise NoWorkers(f"no worker serves model {model!r}")
        by_role: dict[str, list[WorkerInfo]] = {"agg": [], "prefill": [], "decode": []}
        for w in found:
            by_role.setdefault(w.role, []).append(w)
        return ModelWorkers(by_role["agg"], by_role["prefill"], by_role["decode"])

    def first(self, workers: ModelWorkers, token_ids: Sequence[int]) -> WorkerInfo:
        """The aggregated worker, or the prefill worker of a disaggregated request."""
        pool = workers.first_leg()
        if not pool:
            # NB: prefill workers without a decode worker (one just left, or the other is not yet
            # discovered) cannot serve: a 404 the DGD's proxy retries on another frontend, not a 500.
            raise NoWorkers("no worker can take the request now: prefill workers but no decode worker")
        if workers.disaggregated:
            pool = self.select_prefill(self.topology, pool, workers.decode)
        block_size = pool[0].card.block_size
        overlaps = self.index.overlaps(tokenizer.block_hashes(token_ids, block_size))
        return self.policy.choose(pool, len(token_ids), overlaps, {}, decode_leg=False)

    def decode(self, workers: ModelWorkers, prefill: WorkerInfo, isl: int) -> WorkerInfo:
        """The decode worker to receive ``prefill``'s KV; raises NoSameDomainDecode under fail/required."""
        choice = self.decode_candidates(self.topology, prefill, workers.decode)
        if choice.fallback:
            level = self.topology.level or ""
            self.log.warning(topology.fallback_warning(level, prefill))
            self.fallbacks += 1
            self._fallback_metric.labels(level).inc()
        return self.policy.choose(choice.candidates, isl, {}, choice.multipliers, decode_leg=True)

    @staticmethod
    def blocks(worker: WorkerInfo, isl: int) -> float:
        return isl / worker.card.block_size
