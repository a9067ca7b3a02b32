"""The load rule, reconcile/constrain and the Virtual connector, as units."""

from __future__ import annotations

import math

import pytest

from servecert.protocol.planner_decisions import MemoryDecisionStore
from servecert.reference_impl.planner import load_scaling
from servecert.reference_impl.planner.config import PlannerConfig, PlannerConfigError
from servecert.reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED
from servecert.reference_impl.planner.connectors.virtual import VirtualConnector
from servecert.reference_impl.planner.reconcile import Targets, gpus, reconcile


class TestLoadRule:
    def test_scales_up_by_one_only_when_every_engine_is_above_the_sla(self) -> None:
        assert load_scaling.decide(2, [600, 700], [], 500, 0.8, 1).target == 3
        assert load_scaling.decide(2, [600, 400], [], 500, 0.8, 1).target == 2

    def test_scales_down_only_when_consolidation_stays_below_sla_times_sensitivity(self) -> None:
        assert load_scaling.decide(3, [100, 100, 100], [350, 390, 399], 500, 0.8, 1).target == 2
        assert load_scaling.decide(3, [100, 100, 100], [350, 401, 300], 500, 0.8, 1).target == 3

    def test_never_proposes_below_min_endpoint_and_holds_without_data(self) -> None:
        assert load_scaling.decide(1, [1.0], [], 500, 0.8, 1).target == 1
        assert load_scaling.decide(2, [], [], 500, 0.8, 1).reason == load_scaling.NO_DATA
        assert load_scaling.decide(2, [10, 10], [math.inf, 5], 500, 0.8, 1).target == 2


class TestReconcile:
    cfg = PlannerConfig(max_gpu_budget=6, prefill_engine_num_gpu=1, decode_engine_num_gpu=2)

    def test_the_throughput_floor_is_approached_one_step_per_decision(self) -> None:
        target, notes = reconcile(Targets(1, 1), Targets(1, 1), Targets(4, 1), self.cfg)
        assert target == Targets(2, 1) and "throughput_floor" in notes

    def test_min_endpoint_holds_even_if_every_proposal_is_lower(self) -> None:
        cfg = PlannerConfig(min_endpoint=2, max_gpu_budget=10)
        assert reconcile(Targets(2, 2), Targets(1, 1), None, cfg)[0] == Targets(2, 2)

    def test_the_gpu_budget_gives_back_increases_first(self) -> None:
        target, notes = reconcile(Targets(2, 2), Targets(3, 3), None, self.cfg)
        assert gpus(target, self.cfg) <= 6 and target == Targets(2, 2) and "gpu_budget" in notes

    def test_a_count_already_over_budget_is_lowered_toward_min_endpoint(self) -> None:
        target, _ = reconcile(Targets(3, 3), None, None, self.cfg)
        assert gpus(target, self.cfg) <= 6 and target.prefill >= 1 and target.decode >= 1

    def test_min_endpoint_that_cannot_fit_the_budget_is_refused_at_start(self) -> None:
        with pytest.raises(PlannerConfigError, match="max_gpu_budget"):
            PlannerConfig(min_endpoint=3, max_gpu_budget=4)


class TestVirtualConnector:
    async def test_decisions_wait_for_the_acknowledgement_and_ids_count_from_zero(self) -> None:
        store = MemoryDecisionStore("ns")
        conn = VirtualConnector(store, ack_timeout_s=60)
        assert await conn.scale_to(2, 1) == ISSUED
        assert (await store.get_decision()) is not None and (await store.get_decision()).decision_id == 0  # type: ignore[union-attr]
        assert await conn.in_progress()
        assert await conn.scale_to(3, 1) == AWAITING_ACK
        await store.put_scaled_decision_id(0)
        assert not await conn.in_progress()
        assert await conn.scale_to(2, 1) == UNCHANGED
        assert await conn.scale_to(3, 1) == ISSUED
        assert (await store.get_decision()).decision_id == 1  # type: ignore[union-attr]
        assert store.keys["v1/ns/planner/num_prefill_workers"] == 3

    async def test_an_unacknowledged_decision_is_superseded_after_the_timeout(self) -> None:
        conn = VirtualConnector(MemoryDecisionStore(), ack_timeout_s=0.0)
        assert await conn.scale_to(2, 2) == ISSUED
        assert not await conn.in_progress() and await conn.timed_out()
        assert await conn.scale_to(3, 3) == ISSUED
        assert await conn.scale_to(2, 2) == ISSUED  # NB: the abandoned (2, 2) was never carried out: asking again is new

    async def test_the_timeout_counts_from_the_decision_not_from_a_refusal(self) -> None:
        conn = VirtualConnector(MemoryDecisionStore(), ack_timeout_s=60.0)
        assert await conn.scale_to(2, 2) == ISSUED
        conn._issued_at -= 61.0  # NB: as if the decision had waited its whole timeout
        assert not await conn.in_progress() and await conn.timed_out()


class TestAcknowledgementTimeout:
    """Seed 003's guard ends with the timeout: a planner whose decision is never acknowledged decides again.

    Before the fix the planner held on ``in_progress`` for ever, so the connector's timeout was
    never reached: with the timeout at 0 and no acknowledgement it issued nothing after the first.
    """

    async def test_the_planner_decides_again_once_an_unacknowledged_decision_times_out(self) -> None:
        import aiohttp

        from servecert.reference_impl.planner.planner import Planner, Worker

        class TwoDecode:
            def workers(self) -> list[Worker]:
                return [Worker("p0", "http://127.0.0.1:9", "prefill"), *(Worker(f"d{i}", "http://127.0.0.1:9", "decode") for i in range(2))]

        store = MemoryDecisionStore("ns")
        cfg = PlannerConfig(enable_throughput_scaling=False, min_endpoint=1, max_gpu_budget=8, scaling_ack_timeout_s=0.0)
        async with aiohttp.ClientSession() as session:
            planner = Planner(cfg, TwoDecode(), VirtualConnector(store, 0.0), session)
            planner.decide_load = lambda current, *_: load_scaling.LoadProposal(current + 1, "all_above_sla")
            first = await planner.step()
            second = await planner.step()
            await planner.stop()
        assert first.action == ISSUED and second.action == ISSUED, (first, second)
        assert (await store.get_decision()).decision_id == 1  # type: ignore[union-attr]


async def test_the_planner_serves_its_gauges_ticks_and_report() -> None:
    import aiohttp
    from aiohttp.test_utils import TestClient, TestServer

    from servecert.reference_impl.planner import app
    from servecert.reference_impl.planner.diagnostics import TickRecord
    from servecert.reference_impl.planner.planner import Planner, Worker

    class NoWorkers:
        def workers(self) -> list[Worker]:
            return []

    async with aiohttp.ClientSession() as session:
        planner = Planner(PlannerConfig(), NoWorkers(), VirtualConnector(MemoryDecisionStore(), 60), session)
        planner.diagnostics.record(TickRecord(5.0, 1, 1, 2, 1, 1, 1, 450.0, 30.0, 1.0, 1.2, "all_above_sla", "within_band", "issued"))
        async with TestClient(TestServer(app.create_app(planner))) as client:
            text = await (await client.get("/metrics")).text()
            assert "dynamo_planner_estimated_ttft_ms 450.0" in text
            assert 'dynamo_planner_load_scaling_decisions_total{component="prefill",reason="all_above_sla"} 1.0' in text
            assert (await (await client.get("/diagnostics?last=1")).json())[0]["desired_prefill"] == 2
            assert "data:image/png;base64," in await (await client.get("/report")).text()


async def test_a_planner_starting_beside_loading_workers_plans_from_what_the_connector_asks_for() -> None:
    """On a cluster the planner pod starts with the workers; before the fix it took the 0 + 0 it saw registered as its
    decision, held on the mismatch for ever, and never scaled (every PLANNER-SCALING case on the cluster)."""
    import aiohttp

    from servecert.reference_impl.planner.planner import Planner, Targets, Worker

    class NoneYet:
        def workers(self) -> list[Worker]:
            return []

    class AsksOneAndOne(VirtualConnector):
        async def asked(self) -> tuple[int, int] | None:
            return 1, 1

        async def in_progress(self) -> bool:
            return True  # NB: the operator's ready replicas are behind the DGD's: the guard holds

    async with aiohttp.ClientSession() as session:
        planner = Planner(PlannerConfig(enable_throughput_scaling=False), NoneYet(), AsksOneAndOne(MemoryDecisionStore(), 60), session)
        record = await planner.step()
        await planner.stop()
    assert planner.desired == Targets(1, 1) and record.action == "observe", (planner.desired, record)


async def test_the_planner_serves_health_while_its_loop_runs() -> None:
    import aiohttp
    from aiohttp.test_utils import TestClient, TestServer

    from servecert.reference_impl.planner import app
    from servecert.reference_impl.planner.planner import Planner, Worker

    class NoWorkers:
        def workers(self) -> list[Worker]:
            return []

    async with aiohttp.ClientSession() as session:
        planner = Planner(PlannerConfig(), NoWorkers(), VirtualConnector(MemoryDecisionStore(), 60), session)
        async with TestClient(TestServer(app.create_app(planner))) as client:
            assert (await client.get("/health")).status == 503
            planner.start()
            assert (await client.get("/health")).status == 200
            await planner.stop()


async def test_a_scale_down_waits_while_the_decode_component_s_in_flight_kv_is_rising() -> None:
    """In the first seconds of a long-output load the decode engines look light; before the guard, the reference removed
    one of two decode workers 4 s into decode-bound's load on a cluster and missed the SLA at t=40 s (93.0%)."""
    import aiohttp

    from servecert.reference_impl.planner import estimate
    from servecert.reference_impl.planner.planner import RISING, Planner, Worker

    class NoWorkers:
        def workers(self) -> list[Worker]:
            return []

    def loads(*kv: float) -> list[estimate.EngineLoad]:
        return [estimate.EngineLoad(f"d{i}", 0.0, k, 0.0, 0.5, 10) for i, k in enumerate(kv)]

    down = load_scaling.LoadProposal(1, load_scaling.DOWN)
    async with aiohttp.ClientSession() as session:
        planner = Planner(PlannerConfig(down_stabilisation_ticks=1), NoWorkers(), VirtualConnector(MemoryDecisionStore(), 60), session)
        decode = {"d0", "d1", "d2"}
        rising = []
        planner.isl, planner.osl = 64.0, 32.0  # one request's KV: 96 tokens
        for kv in ((100.0, 100.0), (200.0, 190.0), (230.0, 230.0), (300.0, 150.0, 10.0), (), (300.0, 200.0), (40.0,), (70.0,)):
            planner._loads = loads(*kv)
            rising.append(planner._decode_rising(decode))
        await planner.stop()
        # the first tick has nothing to compare; +95%; +18%; a third engine joins: the sum (460) is what counts; no loads;
        # +40 tokens; a fall; +75% but less than one request's KV (a fallen load's few sequences)
        assert rising == [False, True, False, False, False, False, False, False]
        assert planner._stabilised("decode", 2, down, rising=True) == load_scaling.LoadProposal(2, RISING)
        assert planner._stabilised("decode", 2, down, rising=False) == down
