"""Dynamo's VirtualConnector, planner side: write a decision, wait for its acknowledgement.

``scale_to`` writes ``(num_prefill, num_decode, decision_id)`` to the ``DecisionStore`` in one
put, the first id being 0 and each next one +1. Nothing changed: no new id. The previous
decision not yet acknowledged (``scaled_decision_id < decision_id``): ``in_progress`` holds the
planner and ``scale_to`` refuses, until ``ack_timeout_s`` real seconds after that decision was
issued; then the decision is abandoned (``timed_out``) and the planner proceeds from the workers
it sees (Dynamo's ``SCALING_MAX_WAIT_TIME``, 1800 s by default) — a dead external system must not
freeze the planner forever, nor may a slow one see decisions pile up.

The timeout used to start at the first refused ``scale_to``, but the planner asks ``in_progress``
first and holds while it is true, so ``scale_to`` was never called: with the timeout at 0 and no
acknowledgement the planner issued nothing for ever.
"""

from __future__ import annotations

import logging
import time

from servecert.protocol.planner_decisions import UNSET, DecisionStore, ScalingDecision
from servecert.reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED

log = logging.getLogger("servecert.planner.virtual")


class VirtualConnector:
    def __init__(self, store: DecisionStore, ack_timeout_s: float) -> None:
        self.store = store
        self.ack_timeout_s = ack_timeout_s
        self.last: ScalingDecision | None = None
        self._issued_at = 0.0
        self._timed_out = False

    async def _unacknowledged(self) -> bool:
        return self.last is not None and await self.store.get_scaled_decision_id() < self.last.decision_id

    async def in_progress(self) -> bool:
        """The last decision is neither acknowledged nor past ``ack_timeout_s`` since it was issued."""
        if not await self._unacknowledged():
            return False
        if time.monotonic() - self._issued_at < self.ack_timeout_s:
            return True
        if not self._timed_out:
            assert self.last is not None
            log.warning("scaling decision %s not acknowledged within %.0f s; proceeding", self.last.decision_id, self.ack_timeout_s)
            self._timed_out = True
        return False

    async def timed_out(self) -> bool:
        """The last decision was abandoned: not acknowledged within ``ack_timeout_s``."""
        return self._timed_out and await self._unacknowledged()

    async def asked(self) -> tuple[int, int] | None:
        return None

    async def scale_to(self, prefill: int, decode: int) -> str:
        if await self.in_progress():
            log.info("Previous scaling decision not ready, skipping new decision")
            return AWAITING_ACK
        last = self.last
        if last is not None and not self._timed_out and (last.num_prefill_workers, last.num_decode_workers) == (prefill, decode):
            return UNCHANGED
        self._timed_out = False
        self._issued_at = time.monotonic()
        next_id = 0 if self.last is None else self.last.decision_id + 1
        if self.last is None:
            stored = await self.store.get_decision()
            next_id = 0 if stored is None or stored.decision_id == UNSET else stored.decision_id + 1
        self.last = ScalingDecision(prefill, decode, next_id)
        await self.store.put_decision(self.last)
        return ISSUED
