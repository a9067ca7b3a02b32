"""Seed 001 Solution B as a pure step function: whole rollouts simulated, every rule checked at every step."""

from __future__ import annotations

import itertools

import pytest

from servecert.conformance.tests.rollout_isolation import _verdict as rollout_verdict
from servecert.reference_impl.operator import rollout_plan as rp
from servecert.reference_impl.traffic_split import weights

Counts = dict[str, int]


def ahead_by_at_most_one(counts: Counts, target: Counts) -> bool:
    """Each component at most one worker ahead of the least advanced one's proportional share (as the suite judges it)."""
    return not rollout_verdict.ratio_broken(counts, target)


def simulate(
    target: Counts, surge: int, unavailable: int, lag: int, lags: Counts | None = None, keep_ratio: bool = True
) -> list[tuple[Counts, Counts, Counts, Counts, str]]:
    """Apply steps until Complete; a new worker becomes ready ``lag`` steps (``lags[c]``) after it is asked for."""
    old_d, old_r = dict(target), dict(target)
    new_d = {c: 0 for c in target}
    asked: list[tuple[int, str]] = []  # (step asked, component)
    history = []
    for tick in range(200):
        new_r = {c: sum(1 for at, name in asked if name == c and tick - at >= (lags or {}).get(c, lag)) for c in target}
        situation = rp.Situation(
            target,
            {c: rp.Side(old_d[c], old_r[c]) for c in target},
            {c: rp.Side(new_d[c], new_r[c]) for c in target},
            max_surge=surge,
            max_unavailable=unavailable,
            keep_ratio=keep_ratio,
        )
        step = rp.next_step(situation)
        history.append((dict(old_d), dict(old_r), dict(new_d), new_r, step.phase))
        if step.phase == rp.COMPLETE:
            return history
        for c in target:
            asked += [(tick, c)] * (step.new[c] - new_d[c])
            old_r[c] = min(old_r[c], step.old[c])  # NB: a removed old worker stops serving at once
        old_d, new_d = dict(step.old), dict(step.new)
    raise AssertionError(f"no Complete after 200 steps: {history[-1]}")


TARGETS = [
    {"prefill": 4, "decode": 2},
    {"prefill": 1, "decode": 3},
    {"worker": 5},
    {"prefill": 3, "decode": 3},
    {"prefill": 2, "decode": 2},
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("surge", "unavailable"), [(1, 0), (2, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize(("lag", "lags"), [(0, None), (1, None), (3, None), (0, {"prefill": 4}), (0, {"decode": 4})])
def test_a_whole_rollout_keeps_every_bound_and_completes(
    target: Counts, surge: int, unavailable: int, lag: int, lags: Counts | None
) -> None:
    history = simulate(target, surge, unavailable, lag, lags)
    for old_d, old_r, new_d, new_r, _phase in history:
        for c, t in target.items():
            assert old_d[c] + new_d[c] <= t + surge, (c, old_d, new_d)
            assert old_r[c] + new_r[c] >= t - unavailable, (c, old_r, new_r)
        assert ahead_by_at_most_one(new_d, target), new_d
        assert all(new_d[c] - new_r[c] <= max(1, surge) for c in target), (new_d, new_r)  # "as new workers become ready"
        # NB: the old side by what it has left (as ROLLOUT-ISOLATION judges it): at 4:2, {prefill 2, decode 0} serves nothing.
        assert ahead_by_at_most_one(old_d, target), old_d
        # NB: some side can serve at every step, unless maxSurge 0 at one replica leaves no way around an outage.
        serves = all(old_r.values()) or all(new_r.values())
        assert serves or (surge == 0 and min(target.values()) == 1), (old_r, new_r)
    old_d, _, new_d, new_r, phase = history[-1]
    assert phase == rp.COMPLETE and new_r == target and all(v == 0 for v in old_d.values())


def test_without_the_ratio_rule_the_old_side_runs_prefill_without_decode_at_seed_001s_example() -> None:
    """tests/nonconforming/rollout.py:IgnoresRatio at 4:2, maxSurge 1: the surge and availability bounds hold, the ratio
    does not — for two steps the old side has two prefill and no decode (RolloutSteps[seed-example] must see it)."""
    target = {"prefill": 4, "decode": 2}
    history = simulate(target, 1, 0, 1, keep_ratio=False)
    for old_d, old_r, new_d, new_r, _phase in history:
        for c, t in target.items():
            assert old_d[c] + new_d[c] <= t + 1 and old_r[c] + new_r[c] >= t, (c, old_d, new_d)
    broken = [old_d for old_d, *_ in history if not ahead_by_at_most_one(old_d, target)]
    assert {"prefill": 2, "decode": 0} in broken and len(broken) >= 2, broken


def test_default_strategy_is_seed_001_solution_b_one_for_one() -> None:
    history = simulate({"prefill": 2, "decode": 1}, surge=1, unavailable=0, lag=1)
    phases = [h[4] for h in history]
    assert phases[-1] == rp.COMPLETE and set(phases[:-1]) == {rp.PROGRESSING}
    first_old, _, first_new, _, _ = history[1]
    assert first_new == {"prefill": 1, "decode": 1} and first_old == {"prefill": 2, "decode": 1}


def test_max_surge_lets_that_many_new_workers_start_at_once() -> None:
    history = simulate({"worker": 6}, surge=2, unavailable=0, lag=3)
    in_flight = max(h[2]["worker"] - h[3]["worker"] for h in history)
    assert in_flight == 2
    assert max(h[0]["worker"] + h[2]["worker"] for h in history) == 8


def test_no_new_worker_before_the_new_frontend_is_ready_and_pause_holds_everything() -> None:
    target = {"prefill": 2, "decode": 2}
    sides = {c: rp.Side(2, 2) for c in target}
    waiting = rp.next_step(rp.Situation(target, sides, {}, frontend_ready=False))
    assert waiting.phase == rp.WAITING_FOR_FRONTEND
    assert waiting.new == {"prefill": 0, "decode": 0} and waiting.old == {"prefill": 2, "decode": 2}
    mid_new = {c: rp.Side(1, 1) for c in target}
    paused = rp.next_step(rp.Situation(target, sides, mid_new, paused=True))
    assert paused.phase == rp.PAUSED and paused.old == {"prefill": 2, "decode": 2} and paused.new == {"prefill": 1, "decode": 1}


def test_rollback_is_the_same_mechanism_with_the_sides_swapped() -> None:
    target = {"worker": 3}
    midway_old, midway_new = {"worker": rp.Side(1, 1)}, {"worker": rp.Side(2, 2)}
    forward = rp.next_step(rp.Situation(target, midway_old, midway_new))
    back = rp.next_step(rp.Situation(target, midway_new, midway_old))
    assert forward.new["worker"] == 3 and back.new["worker"] == 2  # NB: back: the old revision (1 ready) grows again
    assert back.phase == rp.PROGRESSING


def test_weights_follow_the_ready_workers_of_each_side() -> None:
    history = simulate({"prefill": 3, "decode": 1}, surge=1, unavailable=0, lag=1)
    shares = [weights.share(*weights.split(sum(h[1].values()), sum(h[3].values()))) for h in history]
    assert shares[0] == 0.0 and shares[-1] == 1.0
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(shares)), shares


def test_maxsurge_and_maxunavailable_both_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="not both 0"):
        rp.Situation({"worker": 1}, {}, {}, max_surge=0, max_unavailable=0)
