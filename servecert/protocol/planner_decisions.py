"""The Virtual connector's decision store: how a planner and an external scaling system talk.

Dynamo's VirtualConnector (``lib/bindings/python/rust/planner.rs``) keeps four keys under
``v1/{namespace}/planner/`` in etcd: the planner writes ``num_prefill_workers``,
``num_decode_workers`` and ``decision_id`` together; the external system that owns the workers
reads the decision, scales, and writes ``scaled_decision_id`` when done. The planner issues no
new decision until ``scaled_decision_id >= decision_id`` (or a timeout passed). ``-1`` means
unset; the first decision has id 0.

Data flow: planner --put_decision--> store --get_decision--> external system (scales)
--put_scaled_decision_id--> store --get_scaled_decision_id--> planner. Both sides depend only on
this module, so the suite's harness can be the external system of any planner that speaks it,
and an adapter for a planner backed by etcd wraps etcd in the same ``DecisionStore`` protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

UNSET = -1
PREFIX = "v1/{namespace}/planner/"
NUM_PREFILL = "num_prefill_workers"
NUM_DECODE = "num_decode_workers"
DECISION_ID = "decision_id"
SCALED_DECISION_ID = "scaled_decision_id"


@dataclass(frozen=True)
class ScalingDecision:
    """Desired worker counts; ``None`` keeps a component as it is (Dynamo's ``None`` argument)."""

    num_prefill_workers: int | None
    num_decode_workers: int | None
    decision_id: int


class DecisionStore(Protocol):
    """The four keys of one namespace; async because real stores (etcd) are remote."""

    async def put_decision(self, decision: ScalingDecision) -> None: ...

    async def get_decision(self) -> ScalingDecision | None: ...

    async def put_scaled_decision_id(self, decision_id: int) -> None: ...

    async def get_scaled_decision_id(self) -> int: ...


class MemoryDecisionStore:
    """An in-process store with Dynamo's key names, for the process environment."""

    def __init__(self, namespace: str = "dynamo") -> None:
        self.prefix = PREFIX.format(namespace=namespace)
        self.keys: dict[str, int] = {}

    async def put_decision(self, decision: ScalingDecision) -> None:
        # NB: all three keys at once, so a reader never sees half a decision. Dynamo's coordinator (Rust, read upstream)
        # puts them one by one with decision_id last: a store for Dynamo reads when decision_id changes
        # (docs/research/dynamo-planner.md).
        self.keys = {
            **self.keys,
            self.prefix + NUM_PREFILL: UNSET if decision.num_prefill_workers is None else decision.num_prefill_workers,
            self.prefix + NUM_DECODE: UNSET if decision.num_decode_workers is None else decision.num_decode_workers,
            self.prefix + DECISION_ID: decision.decision_id,
        }

    async def get_decision(self) -> ScalingDecision | None:
        decision_id = self.keys.get(self.prefix + DECISION_ID, UNSET)
        if decision_id == UNSET:
            return None
        prefill = self.keys.get(self.prefix + NUM_PREFILL, UNSET)
        decode = self.keys.get(self.prefix + NUM_DECODE, UNSET)
        return ScalingDecision(None if prefill == UNSET else prefill, None if decode == UNSET else decode, decision_id)

    async def put_scaled_decision_id(self, decision_id: int) -> None:
        self.keys = {**self.keys, self.prefix + SCALED_DECISION_ID: decision_id}

    async def get_scaled_decision_id(self) -> int:
        return self.keys.get(self.prefix + SCALED_DECISION_ID, UNSET)
