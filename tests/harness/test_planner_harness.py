"""The suite's harness as the Virtual connector's external system: applies, acknowledges, records."""

from __future__ import annotations

import asyncio
import itertools

from servecert.adapters.contract import WorkerRef, WorkerSpec
from servecert.harness.planner.scaling_harness import ScalingHarness
from servecert.protocol import waiting
from servecert.protocol.planner_decisions import MemoryDecisionStore, ScalingDecision


class FakeDeployment:
    def __init__(self) -> None:
        self.frontend_url = "http://127.0.0.1:1"
        self.decisions = MemoryDecisionStore()
        self._ids = itertools.count()
        self.workers = [self._ref("prefill"), self._ref("decode")]

    def _ref(self, role: str) -> WorkerRef:
        n = next(self._ids)
        return WorkerRef(f"{role}-{n}", f"{role}-{n}", "http://127.0.0.1:2", role, {})

    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        await asyncio.sleep(0.05)  # model loading
        ref = self._ref(spec.role)
        self.workers.append(ref)
        return ref

    async def remove_worker(self, ref: WorkerRef) -> None:
        self.workers.remove(ref)

    async def close(self) -> None:
        return None


async def test_a_decision_is_carried_out_then_acknowledged_and_recorded_as_ground_truth() -> None:
    deployment = FakeDeployment()
    harness = ScalingHarness(deployment, {"prefill": WorkerSpec("prefill"), "decode": WorkerSpec("decode")}, {"prefill": 1, "decode": 2})

    async def acked(decision_id: int) -> bool:
        return await deployment.decisions.get_scaled_decision_id() == decision_id

    harness.start()
    try:
        await deployment.decisions.put_decision(ScalingDecision(3, 1, 0))
        await waiting.until_async(lambda: acked(0), timeout_s=2.0, what="decision 0 acknowledged", interval_s=0.01)
        assert harness.ready_counts("prefill")[-1][1] == 3
        assert harness.held_counts("prefill")[-1][1] == 3  # both new workers held GPUs while loading
        await deployment.decisions.put_decision(ScalingDecision(1, None, 1))
        async for _ in waiting.holding_async(2.0, 0.01):  # NB: best effort; the counts below tell
            if await acked(1):
                break
        assert harness.ready_counts("prefill")[-1][1] == 1
        assert harness.decisions[0].acked_t is not None and harness.decisions[0].acked_t >= harness.decisions[0].seen_t
        assert max(g for _, g in harness.gpu_timeline()) == 3 + 2
        assert harness.gpu_seconds(harness.now()) > 0
    finally:
        await harness.close()


class SlowStopDeployment(FakeDeployment):
    """A worker's exit takes ``STOP_S`` (a real worker's shutdown, as Dynamo's does), far longer than a model load."""

    STOP_S = 0.5

    async def remove_worker(self, ref: WorkerRef) -> None:
        self.workers.remove(ref)
        await asyncio.sleep(self.STOP_S)


async def test_one_decisions_additions_start_beside_its_removals_not_after_them() -> None:
    deployment = SlowStopDeployment()
    harness = ScalingHarness(deployment, {"prefill": WorkerSpec("prefill"), "decode": WorkerSpec("decode")}, {"prefill": 1, "decode": 1})
    harness.start()
    try:
        # prefill 1 -> 0 and decode 1 -> 2 in one decision, as an operator applies both replica counts at once
        await deployment.decisions.put_decision(ScalingDecision(0, 2, 0))
        await waiting.until_async(
            lambda: _acked(deployment, 0), timeout_s=3.0, what="decision 0 acknowledged", interval_s=0.01
        )
        stop = next(e.t for e in harness.events if e.kind == "stop")
        start = next(e.t for e in harness.events if e.kind == "start" and e.t > 0)
        assert start - stop < SlowStopDeployment.STOP_S / 2, f"the added decode started {start - stop:.2f} s after the removal began"
    finally:
        await harness.close()


async def _acked(deployment: FakeDeployment, decision_id: int) -> bool:
    return await deployment.decisions.get_scaled_decision_id() == decision_id
