"""The traffic-split rule (seed 001 4.3) tells a split that follows the ready ratio from the plausible wrong ones.

The evidence is a synthetic rollout of RolloutTrafficSplit's DGD (one frontend, four aggregated
workers, maxSurge 1): each new worker becomes Ready ``STEP_S`` after the last, an old one goes
0.2 s later, so the ready ratio steps 0 -> 0.2 -> 0.25 -> 0.4 -> 0.5 -> 0.6 -> 0.75 -> 0.8 -> 1.
Requests arrive 60 a second (the real scenario's rate, ``SPLIT_MAX_TOKENS`` tokens a stream at its
concurrency; steps ~11 s apart, ``SPLIT_STARTUP_S``); a chooser decides which version serves each.
A fixed 50/50 split, an instant switch, a split two steps behind and a split by desired (not
ready) workers are each failed, though the first two average out to about the ready ratio over
the whole rollout; a weighted random choice at the ready ratio passes in nearly every rollout
(the rule allows three binomial standard errors).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.conformance.tests.rollout_isolation._traffic import Sent
from servecert.harness.traffic import Outcome

STEP_S = 11.0
RATE = 60.0
Chooser = Callable[[float, float, random.Random], bool]
"""(arrival, ready ratio in force then, rng) -> served by the new version?"""


def worker(name: str, new: bool) -> dict[str, Any]:
    args = ["--block-size", "32" if new else "16", "--role", "agg"]
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"containers": [{"image": "servecert/fake-engine:1.6.1", "args": args}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def frontend(name: str, new: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"containers": [{"image": "servecert/frontend:1.6.1"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def moments() -> list[tuple[float, dict[str, dict[str, Any]]]]:
    """Old 4 ready; the new frontend Ready at 0.5 s; then each step: one new worker Ready, 0.2 s later one old gone;
    the old frontend goes last."""
    state = {f"w-old-{i}": worker(f"w-old-{i}", False) for i in range(4)} | {"fe-old": frontend("fe-old", False)}
    out = [(0.0, dict(state))]
    state["fe-new"] = frontend("fe-new", True)
    out.append((0.5, dict(state)))
    for step in range(4):
        t = 1.0 + STEP_S * step
        state[f"w-new-{step}"] = worker(f"w-new-{step}", True)
        out.append((t, dict(state)))
        del state[f"w-old-{3 - step}"]
        out.append((t + 0.2, dict(state)))
    del state["fe-old"]
    out.append((1.0 + STEP_S * 3 + 0.5, dict(state)))
    return out


def rollout(choose: Chooser, seed: int = 0) -> verdict.Evidence:
    timeline = verdict.Timeline(moments())
    end = 1.0 + STEP_S * 4
    rng = random.Random(seed)
    records = []
    for i in range(int(end * RATE)):
        arrival = i / RATE
        ratio = verdict.new_share(timeline.at(arrival), scenarios.AGGREGATED_SPLIT) or 0.0
        new = choose(arrival, ratio, rng)
        state = timeline.at(arrival)
        pool = sorted(n for n in state if n.startswith("w-new" if new else "w-old"))
        if not pool:  # NB: a side with no worker left cannot be chosen
            new = not new
            pool = sorted(n for n in state if n.startswith("w-new" if new else "w-old"))
        pod = pool[i % len(pool)]
        records.append((pod, {"role": "agg", "outcome": "ok", "arrival": arrival, "frontend": "fe-new" if new else "fe-old"}))
    sent = [Sent(0.0, 1.0, Outcome("p", 200, tokens=4, done=True)) for _ in records]
    return verdict.Evidence(scenarios.AGGREGATED_SPLIT, sent, records, timeline, 0.0, end)


def split_problems(ev: verdict.Evidence) -> list[str]:
    # NB: the split rule alone (the whole verdict is twice the time, 90 s a make test over the 150 rollouts at 60/s)
    return verdict._share(ev)


def follows(arrival: float, ratio: float, rng: random.Random) -> bool:
    """Weighted round robin at the ratio: the i-th request goes to the new version when i * ratio crosses an integer."""
    i = round(arrival * RATE)
    return math.floor((i + 1) * ratio) > math.floor(i * ratio)


def test_a_split_that_follows_the_ready_ratio_passes() -> None:
    assert verdict.verdict(rollout(follows)) == []


def test_a_weighted_random_choice_at_the_ready_ratio_passes_nearly_always() -> None:
    def at_random(arrival: float, ratio: float, rng: random.Random) -> bool:
        return rng.random() < ratio

    failed = sum(bool(split_problems(rollout(at_random, seed))) for seed in range(100))
    assert failed <= 1, f"{failed} of 100 conforming rollouts failed the split rule"


def test_a_fixed_even_split_is_failed_though_its_average_matches() -> None:
    def even(arrival: float, ratio: float, rng: random.Random) -> bool:
        return ratio == 1 or (ratio > 0 and rng.random() < 0.5)

    ev = rollout(even)
    phases = verdict.split_phases(ev)
    overall = sum(p.new for p in phases) / sum(p.served for p in phases)
    expected = sum((p.lo + p.hi) / 2 * p.served for p in phases) / sum(p.served for p in phases)
    assert abs(overall - expected) < 0.1, "the whole-rollout average cannot tell this split apart"
    problems = split_problems(ev)
    assert problems and "where the ready ratio called for 0.25..0.25" in problems[0], problems
    assert "0.75..0.75" in problems[0], problems


def test_an_instant_switch_is_failed() -> None:
    def switch(arrival: float, ratio: float, rng: random.Random) -> bool:
        return ratio > 0

    problems = split_problems(rollout(switch))
    assert problems and "the new version served 1.00" in problems[0], problems


def test_a_split_two_steps_behind_is_failed() -> None:
    def lagging(arrival: float, ratio: float, rng: random.Random) -> bool:
        behind = max(0.0, arrival - 2 * STEP_S)
        return rng.random() < (verdict.new_share(moments_at(behind), scenarios.AGGREGATED_SPLIT) or 0.0)

    problems = split_problems(rollout(lagging))
    assert problems and "the new version served 0.00" in problems[0], problems


def by_desired(arrival: float, ratio: float, rng: random.Random) -> bool:
    """Weighted random at each set's workers, Ready or not: while new worker k+1 loads (from the old one's deletion to
    its readiness), (k + 1) / 5 instead of k / 4 (0.40 against 0.25 at k = 1, the widest gap)."""
    for k in range(1, 4):
        if 1.0 + STEP_S * (k - 1) + 0.2 <= arrival < 1.0 + STEP_S * k:
            return rng.random() < (k + 1) / 5
    return rng.random() < ratio


def test_a_split_by_desired_workers_is_failed_nearly_always() -> None:
    failed = sum(bool(split_problems(rollout(by_desired, seed))) for seed in range(50))
    assert failed >= 47, f"only {failed} of 50 rollouts weighted by desired workers failed the split rule"


def test_a_split_within_the_follow_allowance_passes() -> None:
    def late(arrival: float, ratio: float, rng: random.Random) -> bool:
        earlier = verdict.new_share(moments_at(max(0.0, arrival - 1.5)), scenarios.AGGREGATED_SPLIT) or 0.0
        return follows(arrival, earlier, rng)

    assert split_problems(rollout(late)) == []


def test_a_version_without_a_ready_worker_of_every_role_counts_no_capacity() -> None:
    state = {
        "p-new": {**worker("p-new", True), "spec": {"containers": [{"image": "servecert/fake-engine:1.6.1",
                                                                     "args": ["--block-size", "32", "--role", "prefill"]}]}},
        **{f"{r}-old": {**worker(f"{r}-old", False), "spec": {"containers": [{"image": "servecert/fake-engine:1.6.1",
                                                                                "args": ["--block-size", "16", "--role", r]}]}}
           for r in ("prefill", "decode")},
    }  # fmt: skip
    assert verdict.new_share(state, scenarios.BLOCK_SIZE) == 0.0


def moments_at(t: float) -> dict[str, dict[str, Any]]:
    return verdict.Timeline(moments()).at(t)
