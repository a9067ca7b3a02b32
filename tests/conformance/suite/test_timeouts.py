"""Timeouts grouped by concern, the bounds moved into it from module constants, and docs/suite.md's tables."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, cast

import pytest

from servecert.conformance.suite import timeouts
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

CONCERNS = ("suite", "router", "operator", "gang", "rollout", "planner")
DOCS = Path(__file__).resolve().parents[3] / "docs" / "suite.md"

MOVED = {  # key -> (the module constant's value, bound, kind): each was a constant that --timeout could not reach
    "worker_topology_wait_s": (10.0, 10.0, timeouts.MINIMUM),  # worker_without_labels_exits.py WAIT_S (2 s; 10 s since judged)
    "operator_unbound_hold_s": (3.0, 3.0, timeouts.MINIMUM),  # operator_topology/labels_after_binding.py UNBOUND_S
    "inference_service_unbound_hold_s": (3.0, 3.0, timeouts.MINIMUM),  # inference_service/status_counts.py HOLD_S
    "gang_nodes_ready_s": (30.0, None, timeouts.MAXIMUM),  # gang_scheduling/_checks.py NODE_READY_S
    "gang_node_step_s": (1.0, 1.0, timeouts.MINIMUM),  # gang_scheduling/replica_atomicity.py STEP_S
    "rollout_share_tolerance": (0.05, 0.1, timeouts.MAXIMUM),  # rollout_isolation/_verdict.py SplitPhase.allowance
    "rollout_starve_s": (5.0, 5.0, timeouts.MAXIMUM),  # rollout_isolation/_verdict.py STARVE_S
    "rollout_warm_s": (2.0, None, timeouts.MAXIMUM),  # rollout_isolation/_verdict.py WARM_S
    "rollout_tail_s": (2.0, 2.0, timeouts.MINIMUM),  # rollout_isolation/_checks.py TAIL_S
    "rollout_pause_settle_s": (2.0, 2.0, timeouts.MAXIMUM),  # rollout_isolation/pause_resume.py SETTLE_S
    "rollout_pause_ready_s": (60.0, None, timeouts.MAXIMUM),  # rollout_isolation/pause_resume.py READY_BOUND_S
    "rollout_pause_hold_s": (5.0, 5.0, timeouts.MINIMUM),  # rollout_isolation/pause_resume.py HOLD_S
    "planner_interval_jitter": (0.25, 0.25, timeouts.MAXIMUM),  # planner_scaling/_assertions.py JITTER
}


def test_every_timeout_has_a_concern_from_the_fixed_set_and_the_class_groups_them() -> None:
    assert tuple(timeouts.CONCERNS) == CONCERNS
    concerns = [f.metadata["concern"] for f in dataclasses.fields(timeouts.Timeouts)]
    assert set(concerns) <= set(CONCERNS)
    assert concerns == sorted(concerns, key=CONCERNS.index), "fields of one concern must sit together, in CONCERNS order"
    assert [k for keys in timeouts.by_concern().values() for k in keys] == list(timeouts.keys())


def test_an_unknown_concern_is_refused_where_the_field_is_declared() -> None:
    with pytest.raises(ValueError, match="timeout concern 'misc' is none of suite, router"):
        timeouts._setting(1.0, "s", "a wait", concern="misc")


def test_describe_lists_the_fields_grouped_by_concern() -> None:
    lines = timeouts.describe()
    assert len(lines) == len(timeouts.keys())
    heads = [re.match(r"\[(\w+)\] (\w+) \(default ", line) for line in lines]
    assert all(heads)
    named = [cast(re.Match[str], m).group(1, 2) for m in heads]
    assert named == [(c, k) for c, keys in timeouts.by_concern().items() for k in keys]


@pytest.mark.parametrize("key", sorted(MOVED))
def test_a_moved_bound_keeps_its_default_and_is_tuned_by_the_override_path(key: str) -> None:
    default, bound, kind = MOVED[key]
    field = {f.name: f for f in dataclasses.fields(timeouts.Timeouts)}[key]
    assert (getattr(timeouts.Timeouts(), key), field.metadata["bound"], field.metadata["kind"]) == (default, bound, kind)
    assert field.metadata["unit"] in ("s", "fraction") and field.metadata["doc"]
    for text in (f"{default / 2:g}", f"{default * 1.5:g}"):
        resolved, value = timeouts.resolve(None, [f"{key}={text}"]), float(text)
        assert getattr(resolved, key) == value and resolved.overrides() == {key: value}
        beyond = bound is not None and (value > bound if kind == timeouts.MAXIMUM else value < bound)
        assert resolved.beyond_bounds() == ({key: value} if beyond else {})


class _Harness:
    """Just what changes_must_be_one_worker_per_interval reads: the held workers over real time, and the decisions."""

    decisions: list[Any] = []

    def held_counts(self, component: str) -> list[tuple[float, int]]:
        # two prefill workers added 1.4 simulated s apart (0.35 s real at planner_time_scale 4): 0.7 of a 2 s load interval
        return [(0.0, 1), (0.5, 2), (0.85, 3)] if component == "prefill" else [(0.0, 1)]


def _run(t: timeouts.Timeouts) -> planner_checks.ScenarioRun:
    harness = cast(Any, _Harness())
    return planner_checks.ScenarioRun(planner_scenarios.STEP_X4, t, planner_checks.planner_spec(t), [], harness, end_s=60.0)


def test_a_timeout_override_of_a_moved_bound_reaches_the_check() -> None:
    with pytest.raises(AssertionError, match="prefill: 2 workers were added or removed within one load interval"):
        planner_assertions.changes_must_be_one_worker_per_interval(_run(timeouts.Timeouts()))  # a quarter interval of jitter
    planner_assertions.changes_must_be_one_worker_per_interval(_run(timeouts.resolve(None, ["planner_interval_jitter=0.35"])))


def _docs_tables() -> dict[str, list[tuple[str, str]]]:
    """docs/suite.md's Timeouts section: concern heading -> (key, default) of each row under it."""
    section = DOCS.read_text().split("\n## Timeouts\n", 1)[1].split("\n## ", 1)[0]
    out: dict[str, list[tuple[str, str]]] = {}
    concern = ""
    for line in section.splitlines():
        if heading := re.match(r"\*\*(\w+)\*\* — ", line):
            concern = heading.group(1)
            out[concern] = []
        elif row := re.match(r"\| `(\w+)` \| ([^|]+) \|", line):
            out[concern].append((row.group(1), row.group(2).strip()))
    return out


def test_docs_list_every_timeout_under_its_concern_with_its_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(timeouts.Timeouts)}
    tables = _docs_tables()
    assert {c: [k for k, _ in rows] for c, rows in tables.items()} == {c: list(keys) for c, keys in timeouts.by_concern().items()}
    for rows in tables.values():
        for key, default in rows:
            assert float(default.split()[0]) == fields[key].default, f"docs/suite.md: {key} default {default}"
