"""Cross-role coordination (seed 004): no prefill replica runs without a decode replica, and the reverse.

Story 4 with one replica per role (2 prefill pods + 4 decode pods, 8 GPUs each) on a case that
has room for one role but not both: 40 GPUs (decode alone fits), 24 GPUs (prefill alone fits).
Nothing may bind for ``gang_settle_s``. Then the case grows to 48 GPUs and the pair must bind
whole, together: the suite's watch allows a role to run alone only for ``gang_bind_window_s``.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.utils import kube as kc

PAIR_GPUS = 48
CASES = {"decode-alone-fits": 40, "prefill-alone-fits": 24}


async def check(ctx: TestContext) -> None:
    env, gpus = kc.env_of(ctx), int(ctx.params["gpus"])
    what = f"1 prefill + 1 decode replica on {gpus} GPUs ({ctx.case.id})"
    history = kc.PodHistory(env).start()
    try:
        have = gpus // gc.GPUS_PER_NODE
        await gc.add_case_nodes(env, have, ready_s=ctx.timeouts.gang_nodes_ready_s)
        body = gc.story4(env, decode=1)
        all_groups = await gc.apply_story(ctx, body, what)
        await gc.hold_and_watch(history, all_groups, ctx.timeouts.gang_settle_s, set(), what)
        await gc.add_case_nodes(env, PAIR_GPUS // gc.GPUS_PER_NODE - have, first=have, ready_s=ctx.timeouts.gang_nodes_ready_s)
        what = f"{what}, then {PAIR_GPUS} GPUs"
        await gc.all_whole(ctx, history, all_groups, what)
        gc.timeline_must_be_atomic(history, all_groups, ctx.timeouts.gang_bind_window_s, what, paired=True)
    finally:
        history.stop()


TEST = ConformanceTest(
    short_name="GangCrossRole",
    description="With room for one role only, neither binds; once the pair fits, prefill and decode bind whole and together.",
    features=(features.GANG_CROSS_ROLE,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(name, {"gpus": gpus}) for name, gpus in CASES.items()),
    check=check,
    seed=SeedRef(
        "004",
        "Gang Scheduling Behavior",
        "- Cross-role coordination (for PD disaggregated): At least one prefill AND one decode replica must be scheduled together",
        note="The 40- and 24-GPU cases (room for one role, not both) are the suite's; the seed's table has no such row.",
    ),
)
