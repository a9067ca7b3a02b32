"""Seed 004's scheduling table, row by row: story 4 (8 GPUs a pod) on 80, 64, 48, 32 and 16 GPUs.

| GPUs | prefill-0 (16) | a decode replica (32) | the other decode (32) | service |
| 80   | bound          | bound                 | bound                 | full capacity |
| 64   | bound          | bound                 | pending               | partial (1P + 1D) |
| 48   | bound          | bound                 | pending               | partial (1P + 1D) |
| 32   | pending        | pending               | pending               | blocked |
| 16   | pending        | pending               | pending               | blocked |

The seed's table names decode-0 as the one that runs; which decode replica a scheduler picks
is its choice (Volcano's sub-job order ties), so the suite asks for exactly one, whole. Rows
with pending replicas are watched for ``gang_settle_s`` after the bound ones settled: nothing
more may bind. Over the whole case no replica may be partly bound, and no role may run without
the other, longer than ``gang_bind_window_s``. Finally the InferenceService's status must count
the replicas the bindings show (readyReplicas per role).
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.utils import kube as kc

FULL, PARTIAL, BLOCKED = "full capacity", "partial (1P + 1D)", "blocked"
ROWS: dict[int, str] = {80: FULL, 64: PARTIAL, 48: PARTIAL, 32: BLOCKED, 16: BLOCKED}


def accepts(row: str, all_groups: gc.Groups) -> Any:
    prefill, decode = set(gc.of_role(all_groups, gc.PREFILL)), set(gc.of_role(all_groups, gc.DECODE))
    if row == FULL:
        return lambda full: full == set(all_groups)
    return lambda full: len(full & prefill) == 1 and len(full & decode) == 1 and full <= prefill | decode


async def check(ctx: TestContext) -> None:
    env, gpus = kc.env_of(ctx), int(ctx.params["gpus"])
    row, what = ROWS[gpus], f"story 4 on {gpus} GPUs (seed 004: {ROWS[gpus]})"
    history = kc.PodHistory(env).start()
    try:
        await gc.add_case_nodes(env, gpus // gc.GPUS_PER_NODE, ready_s=ctx.timeouts.gang_nodes_ready_s)
        body = gc.story4(env)
        all_groups = await gc.apply_story(ctx, body, what)
        bound: set[str] = set()
        if row != BLOCKED:
            bound = await gc.wait_for_replicas(
                history, all_groups, accepts(row, all_groups), ctx.timeouts.gang_bound_s, ctx.timeouts.gang_bind_window_s, what
            )
        if row != FULL:
            await gc.hold_and_watch(history, all_groups, ctx.timeouts.gang_settle_s, bound, what)
        gc.timeline_must_be_atomic(history, all_groups, ctx.timeouts.gang_bind_window_s, what, paired=True)
    finally:
        history.stop()
    await status_must_count(ctx, body, bound, what)


async def status_must_count(ctx: TestContext, body: dict[str, Any], bound: set[str], what: str) -> None:
    """status.components[role].readyReplicas equals the whole replicas the bindings show."""
    env, service = kc.env_of(ctx), body["metadata"]["name"]
    expected = {role: sum(1 for r in bound if r.rsplit("-", 1)[0] == role) for role in (gc.PREFILL, gc.DECODE)}

    async def counted() -> dict[str, Any] | None:
        found = await kc.get(env, kc.ISVC, service)
        comps = ((found or {}).get("status") or {}).get("components") or {}
        got = {role: (comps.get(role) or {}).get("readyReplicas") for role in expected}
        return comps if got == expected else None

    try:
        await kc.wait_for(counted, ctx.timeouts.pods_ready_s, f"{what}: status readyReplicas {expected}")
    except AssertionError:
        found = await kc.get(env, kc.ISVC, service)
        comps = ((found or {}).get("status") or {}).get("components")
        raise AssertionError(f"{what}: status.components {comps}; the bindings show ready replicas {expected}") from None


TEST = ConformanceTest(
    short_name="GangSchedulingTable",
    description="Seed 004's table: story 4 on 80/64/48/32/16 GPUs binds all, 1P + 1D, 1P + 1D, nothing, nothing — "
    "whole replicas only — and status counts what is bound.",
    features=(features.GANG_SCHEDULING_TABLE,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(f"{gpus}-gpus", {"gpus": gpus}) for gpus in ROWS),
    check=check,
    seed=SeedRef(
        "004",
        "Gang Scheduling Behavior",
        "| 64 GPUs | ✅ | ✅ | ⏳ | Partial (1P + 1D) |",
        note="Every row (80/64/48/32/16 GPUs) is a case; in the partial rows the suite accepts either decode replica, whole "
        "(the seed shows decode-0). The readyReplicas check is the suite's reading of 'Aggregate status'.",
    ),
)
