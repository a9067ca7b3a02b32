"""PLANNER-SCALING's ground truth on a cluster: pod versions from the suite's watch become the harness's engine events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios
from servecert.conformance.tests.planner_scaling._cluster import LISTED, PodScaling
from servecert.harness.planner.scaling_harness import READY, START, STOP

DGD = "planned-0"


def pod(name: str, component: str, uid: str, ready: bool = False, deleting: bool = False, dgd: str = DGD) -> dict[str, Any]:
    labels = {"nvidia.com/dynamo-graph-deployment-name": dgd, "nvidia.com/dynamo-component": component}
    meta: dict[str, Any] = {"name": name, "uid": uid, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@dataclass
class History:
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)


def record(events: list[tuple[float, str, dict[str, Any]]]) -> PodScaling:
    scaling = PodScaling(cast(Any, None), DGD, {"prefill": 2, "decode": 4}, t0=100.0)
    scaling._pods = cast(Any, History(events))
    return scaling


def test_pods_become_starts_readiness_and_stops_timed_by_the_watch() -> None:
    scaling = record([
        (100.4, LISTED, pod("p0", "ctx", "u0", ready=True)),  # NB: there when the record began: from t=0
        (101.0, "ADDED", pod("d1", "gen", "u1")),
        (103.0, "MODIFIED", pod("d1", "gen", "u1", ready=True)),
        (104.0, "MODIFIED", pod("d1", "gen", "u1", ready=True)),  # NB: a second Ready version is not a second readiness
        (106.0, "MODIFIED", pod("p0", "ctx", "u0", ready=True, deleting=True)),
        (107.0, "DELETED", pod("p0", "ctx", "u0", ready=True, deleting=True)),
    ])  # fmt: skip
    got = [(e.t, e.component, e.kind, e.engine_id) for e in scaling.events]
    assert got == [
        (0.0, "prefill", START, "p0"), (0.0, "prefill", READY, "p0"),
        (1.0, "decode", START, "d1"), (3.0, "decode", READY, "d1"),
        (6.0, "prefill", STOP, "p0"),
    ]  # fmt: skip
    assert scaling.held_counts("prefill") == [(0.0, 1), (6.0, 0)]
    assert scaling.ready_counts("decode") == [(3.0, 1)]
    assert scaling.gpu_timeline() == [(0.0, 2), (1.0, 6), (6.0, 4)]


def test_decoys_other_dgds_and_pods_already_going_are_not_engines() -> None:
    scaling = record([
        (101.0, "ADDED", pod("x0", "prefill", "u0", ready=True)),  # NB: a decoy component named like the type
        (101.0, "ADDED", pod("b0", "ctx", "u1", ready=True, dgd="a-bystander")),
        (101.0, "ADDED", pod("g0", "gen", "u2", ready=True, deleting=True)),  # NB: terminating when first seen
    ])  # fmt: skip
    assert scaling.events == []


def test_an_allowance_counts_the_start_up_the_added_pods_took_when_longer_than_the_model_load() -> None:
    """The median from first seen to Ready of the pods added after t=0; the pods there at t=0 do not count."""
    scaling = record([
        (100.0, LISTED, pod("p0", "ctx", "u0", ready=True)),
        *((101.0 + i, "ADDED", pod(f"d{i}", "gen", f"u{i + 1}")) for i in range(3)),
        *((101.0 + i + took, "MODIFIED", pod(f"d{i}", "gen", f"u{i + 1}", ready=True)) for i, took in enumerate((1.0, 1.25, 3.0))),
    ])  # fmt: skip
    assert sorted(scaling.startups()) == [1.0, 1.25, 3.0]
    t = Timeouts()
    run = planner_checks.ScenarioRun(planner_scenarios.STEP_X4, t, planner_checks.planner_spec(t), [], scaling, end_s=70.0)
    assert run.engine_startup_s == 1.25 * t.planner_time_scale  # 5 simulated s, more than the 3 s of model load
    per_worker = t.planner_step_intervals * t.planner_load_interval_s + 1.25 * t.planner_time_scale
    assert run.step_allowance(3) == 3 * per_worker + t.planner_settle_intervals * t.planner_load_interval_s
    quick = record([(101.0, "ADDED", pod("d0", "gen", "u1")), (101.25, "MODIFIED", pod("d0", "gen", "u1", ready=True))])
    quick_run = planner_checks.ScenarioRun(planner_scenarios.STEP_X4, t, planner_checks.planner_spec(t), [], quick, end_s=70.0)
    assert quick_run.engine_startup_s == t.planner_engine_startup_s  # never shorter than the model load


def test_on_pods_the_x4_step_leaves_load_to_judge_after_start_ups_that_emptied_the_short_scenario() -> None:
    """Pods that took 9 simulated s to start ended STEP_X4's allowance at its last second; STEP_X4_ON_PODS judges 16 s
    or more of load after start-ups of up to 15 s."""
    t = Timeouts()
    for took, scenario, judged in ((9.0, planner_scenarios.STEP_X4, False), (15.0, planner_scenarios.STEP_X4_ON_PODS, True)):
        ready_at = 101.0 + took / t.planner_time_scale
        slow = record([(101.0, "ADDED", pod("d0", "gen", "u1")), (ready_at, "MODIFIED", pod("d0", "gen", "u1", ready=True))])
        run = planner_checks.ScenarioRun(scenario, t, planner_checks.planner_spec(t), [], slow, end_s=scenario.duration_s)
        [(_, settled)] = run.excused()
        assert (scenario.duration_s - settled >= 16.0) is judged, (scenario.name, settled)
