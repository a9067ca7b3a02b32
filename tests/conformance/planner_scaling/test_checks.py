"""The judges of the planner checks: a failed SLA check says which requests missed and why; the floor checks."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from servecert.adapters.contract import AGG
from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios
from servecert.conformance.tests.planner_scaling import floor_from_perf_model
from servecert.harness.load_generator import Result
from servecert.harness.planner.fpm_record import FpmRecord, Pass
from servecert.harness.planner.host_delay import HostDelays
from servecert.harness.planner.scaling_harness import READY, START, EngineEvent, EngineViews


class NoEngines(EngineViews):
    """A record with no engine and no decision: the SLA share reads only the client's results and the scenario's
    shape; a failed check's message also shows the (empty) workers."""

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []
        self.gpus_per_engine = {}
        self.decisions: list[object] = []


def run_of(results: list[Result], scenario: planner_checks.Scenario = planner_scenarios.BURST) -> planner_checks.ScenarioRun:
    t = Timeouts()
    harness = cast(Any, NoEngines())
    return planner_checks.ScenarioRun(scenario, t, planner_checks.planner_spec(t), results, harness, end_s=60.0)


def ok(sent_s: float, ttft_s: float = 0.01) -> Result:
    return Result(sent_s, True, "", ttft_s, 0.001, 8, 0.1)


def test_the_misses_name_each_failed_request_with_its_error_and_each_slow_one_with_its_latency() -> None:
    failed = Result(2.2, False, "http_502", None, None, 0, 0.1, detail='{"error": {"message": "worker decode-1 unreachable"}}')
    run = run_of([ok(1.0), ok(1.5, ttft_s=9.0), failed])  # NB: before the burst (excused from t=10 s)
    scale = run.scale
    assert run.misses() == (
        f"2 missed: t={2.2 * scale:.1f}s ttft=- tpot=- failed: http_502 {failed.detail}, "
        f"t={1.5 * scale:.1f}s ttft={9.0 * scale * 1000:.0f} tpot={0.001 * scale * 1000:.0f}"
    )
    with pytest.raises(AssertionError, match="worker decode-1 unreachable"):
        planner_assertions.requests_must_meet_sla(run, 0.0)


def test_a_request_late_only_by_the_engines_lateness_meets_the_sla_and_one_late_beyond_it_does_not() -> None:
    """What the fake engines ran behind their timing model is the host's, not the planner's (servecert.harness.planner.host_delay)."""
    t = Timeouts()
    itl_s = planner_checks.planner_spec(t).itl_ms / 1000 / t.planner_time_scale  # the ITL target in real seconds
    slowed = Result(1.0, True, "", 0.01, itl_s * 1.5, 11, 0.5, prompt_fingerprint="slowed")
    slow = Result(1.5, True, "", 0.01, itl_s * 1.5, 11, 0.5, prompt_fingerprint="slow")
    late = {"outcome": "ok", "behind_to_first_token_s": 0.0}
    records = [{**late, "prompt_fingerprint": "slowed", "behind_after_first_token_s": itl_s * 0.6 * 10},
               {**late, "prompt_fingerprint": "slow", "behind_after_first_token_s": itl_s * 0.4 * 10}]
    run = dataclasses.replace(run_of([slowed, slow]), delays=HostDelays.of(records, [slowed, slow]))
    assert run.within_sla(slowed) and not run.within_sla(slow)
    assert "less the engines' lateness" in run.misses()


def test_nothing_missed_says_so() -> None:
    assert run_of([ok(1.0), ok(2.0)]).misses() == "none missed"


def test_a_step_both_components_climb_waits_one_guard_turn_more_than_one_component_s() -> None:
    """Seed 003's pending-desired guard holds the whole graph: decode's first worker waits for prefill's first decision."""
    t = Timeouts()
    run = run_of([], planner_scenarios.STEP_X4)
    turn = t.planner_load_interval_s + t.planner_engine_startup_s
    assert run.guard_turn == turn
    assert run.step_allowance(3, 2) == run.step_allowance(3) + turn
    assert run.excused() == [(planner_scenarios.STEP_AT, planner_scenarios.STEP_AT + run.step_allowance(3, 2))]
    agg = run_of([], dataclasses.replace(planner_scenarios.STEP_X4, mode=AGG))
    assert agg.excused() == [(planner_scenarios.STEP_AT, planner_scenarios.STEP_AT + agg.step_allowance(3))]


class HeldSteps:
    """The harness's ground truth reduced to what the floor and scale-down checks read: every component's serving
    workers over time, and its held ones (loading or serving; default: the serving ones), given in simulated s."""

    def __init__(self, steps: list[tuple[float, int]], scale: float, held: list[tuple[float, int]] | None = None) -> None:
        self.steps = [(t / scale, n) for t, n in steps]
        self.held = self.steps if held is None else [(t / scale, n) for t, n in held]

    def ready_counts(self, component: str) -> list[tuple[float, int]]:
        return self.steps

    def held_counts(self, component: str) -> list[tuple[float, int]]:
        return self.held


def floor_run(scenario: planner_checks.Scenario, window_s: float, steps: list[tuple[float, int]]) -> planner_checks.ScenarioRun:
    t = Timeouts()
    spec = planner_checks.planner_spec(t, throughput_interval_s=window_s)
    harness = cast(Any, HeldSteps(steps, t.planner_time_scale))
    return planner_checks.ScenarioRun(scenario, t, spec, [], harness, end_s=scenario.duration_s)


def scaled_down(ready: list[tuple[float, int]], held: list[tuple[float, int]]) -> planner_checks.ScenarioRun:
    t = Timeouts()
    harness = cast(Any, HeldSteps(ready, t.planner_time_scale, held))
    scenario = planner_scenarios.UP_AND_DOWN
    return planner_checks.ScenarioRun(scenario, t, planner_checks.planner_spec(t), [], harness, end_s=scenario.duration_s)


def test_a_worker_added_after_the_load_fell_is_one_more_to_remove_and_given_its_time() -> None:
    """UP_AND_DOWN falls at t=36 s: first removal by t=56 s, then 8 s per further worker held after the fall."""
    fall, rise = planner_scenarios.FALL_AT, planner_scenarios.RISE_AT
    ready = [(0.0, 1), (20.0, 2), (43.0, 3), (52.0, 2), (60.0, 1)]
    held = [(0.0, 1), (14.0, 2), (37.0, 3), (52.0, 2), (60.0, 1)]  # NB: the third, added at t=37 s, serves at t=43 s
    planner_assertions.workers_must_scale_down_after(scaled_down(ready, held), fall, rise)
    late = [(0.0, 1), (20.0, 2), (43.0, 3), (52.0, 2), (66.0, 1)]
    with pytest.raises(AssertionError, match=r"2 workers at t=64.0 s, 28.0 s after load fell with 3 held"):
        planner_assertions.workers_must_scale_down_after(scaled_down(late, [*held[:4], (66.0, 1)]), fall, rise)
    first_late = [(0.0, 1), (20.0, 2), (58.0, 1)]
    with pytest.raises(AssertionError, match=r"the first scale-down must come by t=56.0 s, it came at t=58.0 s"):
        planner_assertions.workers_must_scale_down_after(scaled_down(first_late, [(0.0, 1), (14.0, 2), (58.0, 1)]), fall, rise)


def test_a_short_idle_period_does_not_lower_the_floor_the_check_demands() -> None:
    dip, window, at = planner_scenarios.SHORT_DIP, planner_scenarios.DIP_WINDOW_S, planner_scenarios.DIP_AT
    judged_from = at - 3.0
    held = floor_run(dip, window, [(0.0, 1), (40.0, 2)])
    planner_assertions.workers_must_hold_the_profile_floor(held, floor_from_perf_model.DIP_PROFILE, judged_from)
    shed = floor_run(dip, window, [(0.0, 1), (40.0, 2), (at + 4.0, 1), (at + planner_scenarios.DIP_S + 4.0, 2)])
    with pytest.raises(AssertionError, match=rf"1 serving workers at t={at + 4.0:.1f} s; .* at least 1.\d\d requests/s"):
        planner_assertions.workers_must_hold_the_profile_floor(shed, floor_from_perf_model.DIP_PROFILE, judged_from)


def test_the_lowest_window_through_the_dip_is_the_window_that_holds_all_of_it() -> None:
    dip, window = planner_scenarios.SHORT_DIP, planner_scenarios.DIP_WINDOW_S
    rates = planner_assertions._window_rates(floor_run(dip, window, [(0.0, 2)]))
    lowest, _ = planner_assertions._lowest_window_rps(rates, dip.duration_s, window)
    assert lowest == pytest.approx(1.7 * (window - planner_scenarios.DIP_S) / window, rel=0.01)  # 1.13 requests/s


def test_under_steady_load_the_floor_is_the_steady_rate_over_the_profiles_capacity() -> None:
    steady = planner_scenarios.PROFILED
    three = floor_run(steady, 6.0, [(0.0, 1), (20.0, 3)])
    planner_assertions.workers_must_hold_the_profile_floor(three, floor_from_perf_model.PROFILE, 32.0)
    two = floor_run(steady, 6.0, [(0.0, 1), (20.0, 3), (40.0, 2)])
    with pytest.raises(AssertionError, match=r"= 3, and the load loop may not go below it"):
        planner_assertions.workers_must_hold_the_profile_floor(two, floor_from_perf_model.PROFILE, 32.0)


class Engines(NoEngines):
    """The harness's record of engines: the two there at t=0 and any added later (real seconds)."""

    def __init__(self, added_at: float | None = None) -> None:
        super().__init__()
        self.events = [EngineEvent(0.0, "decode", kind, e) for e in ("a", "b") for kind in (START, READY)]
        if added_at is not None:
            self.events.append(EngineEvent(added_at, "decode", START, "c"))


def decoding(engine: str, gaps: list[tuple[float, float]], until: float) -> list[Pass]:
    """Back-to-back decoding passes of ``engine`` every ``gap`` real seconds from each ``(from, gap)`` on, to ``until``."""
    out: list[Pass] = []
    t = 0.0
    for i, (start, gap) in enumerate(gaps):
        end = gaps[i + 1][0] if i + 1 < len(gaps) else until
        t = max(t, start)
        while t < end:
            out.append(Pass(t, engine, 8, gap / 2))
            t += gap
    return out


def overload_run(passes: list[Pass], followed: tuple[str, ...] = ("a", "b"), added_at: float | None = None,
                 results: list[Result] | None = None) -> planner_checks.ScenarioRun:
    t = Timeouts()
    scenario = planner_scenarios.AGG_ITL_BOUND
    spec = planner_checks.planner_spec(t, ttft_ms=scenario.sla_ms[0], itl_ms=scenario.sla_ms[1])
    record = FpmRecord(session=None)  # type: ignore[arg-type]
    record.passes, record.followed = passes, list(followed)
    harness = cast(Any, Engines(added_at))
    return planner_checks.ScenarioRun(scenario, t, spec, results or [], harness, end_s=scenario.duration_s, passes=record)


# Real seconds at the default time scale of 4: a gap of 0.02 s is an ITL of 80 ms, 0.03 s is 120 ms (the SLA: 100 ms).
SLOW_FROM = 4.0  # t=16 simulated


def test_the_overload_is_seen_once_every_first_engine_s_decode_cadence_is_over_the_itl_sla_for_one_interval() -> None:
    a = decoding("a", [(0.0, 0.02), (SLOW_FROM, 0.03)], 10.0)
    b = decoding("b", [(0.0, 0.02), (SLOW_FROM + 0.5, 0.03)], 10.0)  # t=18: the later engine decides
    seen = overload_run(a + b).overload_seen_at()
    assert seen is not None and 18.0 < seen <= 20.0, seen


def test_no_overload_is_seen_while_one_engine_stays_within_the_sla() -> None:
    a = decoding("a", [(0.0, 0.03)], 10.0)
    b = decoding("b", [(0.0, 0.02)], 10.0)
    assert overload_run(a + b).overload_seen_at() is None


def test_no_overload_is_seen_after_the_planner_added_a_worker() -> None:
    slow = decoding("a", [(0.0, 0.02), (SLOW_FROM, 0.03)], 10.0) + decoding("b", [(0.0, 0.02), (SLOW_FROM, 0.03)], 10.0)
    assert overload_run(slow, added_at=SLOW_FROM - 1.0).overload_seen_at() is None
    assert overload_run(slow, added_at=SLOW_FROM + 2.0).overload_seen_at() is not None


def test_without_the_truth_of_every_first_engine_no_overload_is_seen() -> None:
    a = decoding("a", [(0.0, 0.03)], 10.0)
    b = decoding("b", [(0.0, 0.03)], 10.0)
    assert overload_run(a + b).overload_seen_at() == Timeouts().planner_load_interval_s
    assert overload_run(a + b, followed=("a", "b", "silent")).overload_seen_at() is None


def test_the_overload_is_also_seen_from_the_median_ttft_the_client_saw() -> None:
    quick = decoding("a", [(0.0, 0.02)], 10.0) + decoding("b", [(0.0, 0.02)], 10.0)
    late = [ok(2.0 + i * 0.05, ttft_s=1.0) for i in range(20)]  # 4000 ms simulated, over the 3000 ms TTFT SLA
    seen = overload_run(quick, results=[ok(i * 0.1) for i in range(20)] + late).overload_seen_at()
    assert seen is not None and 8.0 < seen <= 10.0, seen


class Stepped(HeldSteps):
    decisions: list[object] = []


def stepped_run(held: list[tuple[float, int]]) -> planner_checks.ScenarioRun:
    t = Timeouts()
    harness = cast(Any, Stepped(held, t.planner_time_scale))
    scenario = planner_scenarios.STEP_X4
    return planner_checks.ScenarioRun(scenario, t, planner_checks.planner_spec(t), [], harness, end_s=scenario.duration_s)


def test_a_rise_to_a_throughput_floor_may_be_several_workers_up_to_the_need_plus_one_and_a_removal_never() -> None:
    """STEP_X4 rises to 3.2 engines' worth at t=14 s: four needed, so a floor may lift 1 -> 3, or 1 -> 5, in one decision."""
    to_floor = [(0.0, 1), (21.8, 3), (33.8, 4)]
    planner_assertions.changes_must_be_one_worker_per_interval(stepped_run(to_floor), floor_may_raise=True)
    with pytest.raises(AssertionError, match="the throughput loop is off"):
        planner_assertions.changes_must_be_one_worker_per_interval(stepped_run(to_floor), floor_may_raise=False)
    past_need = [(0.0, 1), (21.8, 3), (27.8, 6)]
    with pytest.raises(AssertionError, match="may reach 5 workers at most"):
        planner_assertions.changes_must_be_one_worker_per_interval(stepped_run(past_need), floor_may_raise=True)
    two_down = [(0.0, 1), (21.8, 2), (27.8, 4), (50.0, 2)]
    with pytest.raises(AssertionError, match="removals are one at a time"):
        planner_assertions.changes_must_be_one_worker_per_interval(stepped_run(two_down), floor_may_raise=True)
