"""Dynamo's VirtualConnector, planner side: write a decision, wait for its acknowledgement.

``scale_to`` writes ``(num_prefill, num_decode, decision_id)`` to the ``DecisionStore`` in one
put, the first id being 0 and each next one +1. Nothing changed: no new id. The previous
decision not yet acknowledged (``scaled_decision_id < decision_id``): refused, until
``ack_timeout_s`` real seconds after the first refusal, after which the planner proceeds anyway
(Dynamo's ``SCALING_MAX_WAIT_TIME``, 1800 s by default) — a dead external system must not freeze
the planner forever, nor may a slow one see decisions pile up.
"""

from __future__ import annotations

import logging
import time

from protocol.planner_decisions import UNSET, DecisionStore, ScalingDecision
from reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED

log = logging.getLogger("servecert.planner.virtual")


class VirtualConnector:
    def __init__(self, store: DecisionStore, ack_timeout_s: float) -> None:
        self.store = store
        self.ack_timeout_s = ack_timeout_s
        self.last: ScalingDecision | None = None
        self._refused_since: float | None = None

    async def in_progress(self) -> bool:
        if self.last is None:
            return False
        return await self.store.get_scaled_decision_id() < self.last.decision_id

    async def scale_to(self, prefill: int, decode: int) -> str:
        if self.last is not None and (self.last.num_prefill_workers, self.last.num_decode_workers) == (prefill, decode):
            return UNCHANGED
        if await self.in_progress():
            now = time.monotonic()
            if self._refused_since is None:
                self._refused_since = now
            if now - self._refused_since < self.ack_timeout_s:
                log.info("Previous scaling decision not ready, skipping new decision")
                return AWAITING_ACK
            log.warning(
                "scaling decision %s not acknowledged within %.0f s; proceeding", self.last and self.last.decision_id, self.ack_timeout_s
            )
        self._refused_since = None
        next_id = 0 if self.last is None else self.last.decision_id + 1
        if self.last is None:
            stored = await self.store.get_decision()
            next_id = 0 if stored is None or stored.decision_id == UNSET else stored.decision_id + 1
        self.last = ScalingDecision(prefill, decode, next_id)
        await self.store.put_decision(self.last)
        return ISSUED
