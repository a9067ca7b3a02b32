"""The pending-desired guard and its timeout, judged from when the suite's external system saw each decision.

``late-ack``: the harness carries each decision out at once but acknowledges it only
``LATE_INTERVALS`` load intervals later; no new decision may be written before the previous one
is acknowledged. ``never-ack``: the harness is a dead system (it carries out nothing and
acknowledges nothing) and ``scaling_ack_timeout_s`` is ``TIMEOUT_INTERVALS`` load intervals;
consecutive decisions must be at least the timeout apart (the guard holds until then), and the
planner must proceed once it has passed (a second decision while the step's demand stays unmet),
each next decision no later than the timeout plus two load intervals (plus the harness's worst
event-loop lag): a wait that grows with each abandoned decision does not proceed "anyway".
The step scenario keeps the planner wanting more workers from the step to the end, so a planner
that waits for acknowledgements would write a new decision every interval without the guard.
Times are the harness's own clocks (``DecisionRecord.seen_t``/``acked_t``), never the planner's.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from servecert import features
from servecert.adapters.contract import PlannerSpec
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

LATE, NEVER = "late-ack", "never-ack"
LATE_INTERVALS = 2.0
TIMEOUT_INTERVALS = 3.0
TOLERANCE_INTERVALS = 1.0
"""How much sooner than the timeout a second unacknowledged decision may be seen: one load tick of observation jitter
(a planner acts on its ticks; one that does not wait at all writes its next decision a tick later, far inside this)."""
LATE_AFTER_INTERVALS = 2.0
"""How much later than the timeout the next unacknowledged decision may be seen (the suite's number): one load interval
for the planner's first tick past the timeout, one of jitter; the harness's worst event-loop lag is added on top, so a
starved machine is never the planner's fault. A wait that grows after each abandoned decision (6, 12, 24 s against a 6 s
timeout) is past it by the third decision."""


async def check(ctx: TestContext) -> None:
    t = ctx.timeouts
    interval = t.planner_load_interval_s
    if ctx.params["mode"] == LATE:
        run = await planner_checks.run(ctx, planner_scenarios.STEP_X4, ack_delay_s=LATE_INTERVALS * interval)
        decisions = run.harness.decisions
        assert len(decisions) >= 2, f"late acknowledgements: the step must lead to 2 decisions or more; {run.summary()}"
        for before, after in itertools.pairwise(decisions):
            acked = before.acked_t
            assert acked is not None and after.seen_t >= acked, (
                f"decision {after.decision.decision_id} was written at t={run.sim(after.seen_t):.1f}s, before decision "
                f"{before.decision.decision_id} (seen at t={run.sim(before.seen_t):.1f}s) was acknowledged"
                + (f" at t={run.sim(acked):.1f}s" if acked is not None else "")
                + ": no new decision may be issued until the previous one completes (simulated seconds)"
            )
        return
    timeout = TIMEOUT_INTERVALS * interval
    run = await planner_checks.run(ctx, planner_scenarios.STEP_X4, acknowledge=False, tweak=lambda spec: _with_timeout(spec, timeout))
    decisions = run.harness.decisions
    assert len(decisions) >= 2, (
        f"no decision was acknowledged and scaling_ack_timeout_s={timeout:g}s passed, but the planner wrote "
        f"{len(decisions)} decision(s) in {run.end_s:.0f}s while the step's demand stayed unmet: after the timeout it must "
        f"proceed with new decisions; {run.summary()}"
    )
    for before, after in itertools.pairwise(decisions):
        gap = run.sim(after.seen_t - before.seen_t)
        assert gap >= timeout - TOLERANCE_INTERVALS * interval, (
            f"decision {after.decision.decision_id} came {gap:.1f}s after decision {before.decision.decision_id}, which was never "
            f"acknowledged: the guard must hold for scaling_ack_timeout_s={timeout:g}s (simulated seconds)"
        )
    decisions_must_proceed_after_timeout(run, timeout)


def decisions_must_proceed_after_timeout(run: planner_checks.ScenarioRun, timeout: float) -> None:
    """Past the timeout the planner proceeds: while the step's demand stays unmet, each next decision comes within the
    timeout plus ``LATE_AFTER_INTERVALS`` load intervals plus the harness's worst loop lag (simulated seconds)."""
    lag = run.sim(run.lag_worst_s)
    latest = timeout + LATE_AFTER_INTERVALS * run.load_interval + lag
    for before, after in itertools.pairwise(run.harness.decisions):
        gap = run.sim(after.seen_t - before.seen_t)
        assert gap <= latest, (
            f"decision {after.decision.decision_id} came {gap:.1f}s after decision {before.decision.decision_id} (seen at "
            f"t={run.sim(before.seen_t):.1f}s), which was never acknowledged, while the step's demand stayed unmet: past "
            f"scaling_ack_timeout_s={timeout:g}s the planner proceeds with new decisions, so the next must come within "
            f"{latest:.1f}s (the timeout, {LATE_AFTER_INTERVALS:g} load intervals and the harness's worst loop lag {lag:.1f}s: "
            f"the suite's allowance; simulated seconds); {run.summary()}"
        )


def _with_timeout(spec: PlannerSpec, timeout: float) -> PlannerSpec:
    return replace(spec, scaling_ack_timeout_s=timeout)


TEST = ConformanceTest(
    short_name="PlannerScalingAcknowledgementGuard",
    description="No decision is written before the previous one is acknowledged, until scaling_ack_timeout_s; after it the "
    "planner proceeds, each next unacknowledged decision within the timeout plus two load intervals.",
    features=(features.PLANNER_VIRTUAL_CONNECTOR, features.PLANNER_STABILITY),
    environments=frozenset({"process"}),
    cases=(Case(LATE, {"mode": LATE}), Case(NEVER, {"mode": NEVER})),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "VirtualConnector",
        "Timeout: If scaling isn’t acknowledged within 1800s (configurable), the planner proceeds with new decisions anyway.",  # noqa: RUF001 (the seed's apostrophe)
        note="Also 'Planner sees scaled_decision_id >= decision_id and proceeds' and the pending-desired guard of Scaling "
        "Decisions. The intervals (acknowledged 2 load intervals late; a timeout of 3; the next decision at most 2 past it, "
        "plus the harness's loop lag) are the suite's.",
    ),
)
