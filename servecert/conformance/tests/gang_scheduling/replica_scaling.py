"""Scaling replicas (seed 004): the PodGroup's minTaskMember follows, whole replicas bind and are freed.

Story 4 with 1 prefill + 1 decode replica on 56 GPUs binds the pair. Decode goes to 2 replicas:
the PodGroup gains ``decode-1: 4`` and decode-1 (32 GPUs) must wait whole with 8 GPUs free.
Three nodes more (80 GPUs): decode-1 binds whole. Decode back to 1: decode-1's pods go, its key
leaves minTaskMember, the pair stays bound. The suite's watch covers all of it.
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.utils import kube as kc

START_NODES, MORE_NODES = 7, 3


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    history = kc.PodHistory(env).start()
    try:
        await gc.add_case_nodes(env, START_NODES, ready_s=t.gang_nodes_ready_s)
        body = gc.story4(env, decode=1)
        service = body["metadata"]["name"]
        pair = {"prefill-0", "decode-0"}
        what = "story 4 with 1 prefill + 1 decode on 56 GPUs"
        await kc.create(env, kc.ISVC, body)
        await gc.wait_for_replicas(history, gc.groups(body), lambda full: full == pair, t.gang_bound_s, t.gang_bind_window_s, what)
        await task_members_must_be(ctx, service, {"prefill-0": 2, "decode-0": 4}, what)

        body = gc.story4(env, decode=2)
        all_groups, what = gc.groups(body), "after scaling decode to 2 replicas (8 GPUs free)"
        await kc.patch(env, kc.ISVC, service, {"spec": {"roles": body["spec"]["roles"]}})
        await task_members_must_be(ctx, service, {"prefill-0": 2, "decode-0": 4, "decode-1": 4}, what)
        await gc.pods_must_exist(env, all_groups["decode-1"], t.operator_reconcile_s, what)
        await gc.hold_and_watch(history, all_groups, t.gang_settle_s, pair, what)

        await gc.add_case_nodes(env, MORE_NODES, first=START_NODES, ready_s=t.gang_nodes_ready_s)
        what = "after the cluster grew to 80 GPUs"
        await gc.all_whole(ctx, history, all_groups, what)

        body = gc.story4(env, decode=1)
        what = "after scaling decode back to 1 replica"
        await kc.patch(env, kc.ISVC, service, {"spec": {"roles": body["spec"]["roles"]}})
        await task_members_must_be(ctx, service, {"prefill-0": 2, "decode-0": 4}, what)
        await pods_must_be_gone(ctx, all_groups["decode-1"], what)
        gc.replicas_must_be_bound(gc.bound_at_end(gc.timeline(history)), all_groups, pair, what)
        gc.timeline_must_be_atomic(history, all_groups, t.gang_bind_window_s, "scaling decode 1 -> 2 -> 1", paired=True)
    finally:
        history.stop()


async def task_members_must_be(ctx: TestContext, service: str, expected: dict[str, int], what: str) -> None:
    env = kc.env_of(ctx)

    async def matches() -> dict[str, Any] | None:
        group = await kc.get(env, kc.PODGROUP, service)
        return group if ((group or {}).get("spec") or {}).get("minTaskMember") == expected else None

    try:
        await kc.wait_for(matches, ctx.timeouts.operator_reconcile_s, what)
    except AssertionError:
        group = await kc.get(env, kc.PODGROUP, service)
        got = None if group is None else group.get("spec", {}).get("minTaskMember")
        raise AssertionError(f"{what}: PodGroup {service} minTaskMember {got}; expected {expected}") from None


async def pods_must_be_gone(ctx: TestContext, names: frozenset[str], what: str) -> None:
    env = kc.env_of(ctx)

    async def gone() -> bool:
        return not names & {p["metadata"]["name"] for p in await kc.pods(env)}

    await kc.wait_for(gone, ctx.timeouts.operator_reconcile_s, f"{what}: pods {sorted(names)} deleted")


TEST = ConformanceTest(
    short_name="GangReplicaScaling",
    description="Scaling decode 1 -> 2 -> 1 updates minTaskMember, the new replica waits whole for room and binds whole, "
    "and scaling down frees it whole.",
    features=(features.GANG_REPLICA_SCALING,),
    environments=frozenset({"cluster"}),
    cases=(Case("decode-1-2-1"),),
    check=check,
    seed=SeedRef(
        "004",
        "InferenceService Controller responsibilities",
        "minTaskMemberwhen role replicas change",
        note="The seed's sentence, broken over two lines, reads 'Update PodGroup - Adjust minTaskMember when role replicas "
        "change'; the new replica waiting and binding whole is the intra-replica atomicity rule.",
    ),
)
