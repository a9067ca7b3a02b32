"""Intra-replica atomicity, watched while capacity grows one node at a time (seed 004).

Story 4 is applied to a case with no nodes; then its ten 8-GPU nodes arrive one every
``gang_node_step_s``. At every step some replica's pods could be placed in part — a scheduler without
gangs does exactly that. The suite's own watch records every binding with the time it saw it:
no replica may be partly bound, and no role may run without the other, for longer than
``gang_bind_window_s``; at the end every replica is whole.
"""

from __future__ import annotations

import asyncio

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.utils import kube as kc

NODES = 10


async def check(ctx: TestContext) -> None:
    env, what = kc.env_of(ctx), "story 4 while its 80 GPUs arrive one node at a time"
    history = kc.PodHistory(env).start()
    try:
        body = gc.story4(env)
        all_groups = await gc.apply_story(ctx, body, what)
        for i in range(NODES):
            await gc.add_case_nodes(env, 1, first=i, ready_s=ctx.timeouts.gang_nodes_ready_s)
            await asyncio.sleep(ctx.timeouts.gang_node_step_s)
            gc.timeline_must_be_atomic(history, all_groups, ctx.timeouts.gang_bind_window_s, f"{what} ({i + 1} nodes)", paired=True)
        await gc.all_whole(ctx, history, all_groups, what)
        gc.timeline_must_be_atomic(history, all_groups, ctx.timeouts.gang_bind_window_s, what, paired=True)
    finally:
        history.stop()


TEST = ConformanceTest(
    short_name="GangReplicaAtomicity",
    description="While story 4's nodes arrive one by one, no replica is ever partly bound (nor a role running alone) "
    "beyond the bind window; all replicas end whole.",
    features=(features.GANG_REPLICA_ATOMICITY,),
    environments=frozenset({"cluster"}),
    cases=(Case("nodes-one-by-one"),),
    check=check,
    seed=SeedRef(
        "004",
        "Gang Scheduling Behavior",
        "- Intra-replica atomicity: All pods within a single replica are scheduled together (all-or-nothing)",
        note="Nodes arriving one by one is the suite's scenario; a partial binding shorter than gang_bind_window_s is "
        "tolerated (one decision's bindings reach the API one by one). The watch also holds cross-role coordination.",
    ),
)
