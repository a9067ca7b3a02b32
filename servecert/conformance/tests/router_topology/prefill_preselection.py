"""Before prefill selection, prefill workers with a same-domain decode worker are preferred; else all are eligible.

``prefers``: two prefill workers in two domains, a decode worker in only one of them: every
request's KV must come from the prefill worker beside it, under either policy (the row's fallback
cell is "Same as fail") and with the policy unset (the default is fail). ``otherwise-all``: no
prefill worker has a decode worker in its domain (the only one shares nothing with either), under
fallback so requests are served: both prefill workers must be used, as the row's "then fallback to
all other prefill workers" says.
``unlabelled-decode``: the prefers shape plus a decode worker that shares the second prefill
worker's every label but lacks the level's: it is in no domain (the row "Worker missing topology
level"), so no decode worker is "available in" the second one's domain and only the first may be
chosen, under fail, where the second's requests could not be served. A router whose pre-selection
reads a missing label as any domain counts a decode worker it cannot route to.
``decode-joins``: the prefers shape, under fail, then a decode worker joins the other prefill
worker's domain (the row's "window where a decode worker can join"): once a request's KV comes
from that prefill worker (within the suite's eventual-consistency bound), both prefill workers
have a same-domain decode worker and both must be used. A router that computes its preferred
prefill workers once, or only when the prefill workers change, keeps only the first.
``decode-leaves``: the reverse, under fail: each prefill worker has a decode worker beside it,
both are used; then the second one's decode worker leaves. After the suite's eventual-consistency
bound (a fixed wait: before it, a router that has not yet seen the leave may still choose either),
only the first prefill worker has a decode worker "available in its domain", so every request's
KV must come from it: a router whose preferred set only grows (updated when a decode worker joins,
never when one leaves) still chooses the second, whose requests then fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp

from servecert import features
from servecert.adapters.contract import WorkerRef
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness.observe import GroundTruth, Transfer

PREFERS = "prefers"
OTHERWISE_ALL = "otherwise-all"
DECODE_JOINS = "decode-joins"
DECODE_LEAVES = "decode-leaves"
UNLABELLED_DECODE = "unlabelled-decode"
REQUESTS = 24


async def check(ctx: TestContext) -> None:
    level, policy, shape = ctx.params["level"], ctx.params["policy"], ctx.params["shape"]
    if shape == DECODE_JOINS:
        await _check_decode_joins(ctx, level)
        return
    if shape == DECODE_LEAVES:
        await _check_decode_leaves(ctx, level)
        return
    if shape in (PREFERS, UNLABELLED_DECODE):
        workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0)]
        workers += [shapes.worker("decode", shapes.missing(level, 1))] if shape == UNLABELLED_DECODE else []
    else:
        far = shapes.sharing_nothing(shapes.domains(level, 0)) | {level: f"{level}-with-no-prefill"}
        workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.worker("decode", far)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, policy))
    near, other = deployment.workers[0], deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=6)
    what = f"two prefill workers in two {level}s, policy={policy or 'unset'}, shape={shape}"
    assertions.requests_must_succeed(run.outcomes, what)
    sources = {t.source for t in run.transfers()}
    if shape in (PREFERS, UNLABELLED_DECODE):
        assert sources == {near.engine_id}, (
            f"{what}: only the prefill worker with a same-{level} decode worker ({near.engine_id}) may be chosen; "
            f"KV came from {sorted(sources)}"
        )
        return
    _both_must_be_chosen(run.transfers(), near, other, f"{what}: no prefill worker is beside a decode worker")


async def _check_decode_joins(ctx: TestContext, level: str) -> None:
    bounds = ctx.timeouts
    joining = shapes.decode(level, 1, "joining")
    workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail", standby=[joining]))
    near, other = deployment.workers[0], deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        before = await router_checks.drive(session, deployment, count=6, concurrency=3)
        assertions.requests_must_succeed(before.outcomes, f"before a decode worker joins the second prefill worker's {level}")
        await deployment.add_worker(joining)
        await assertions.condition_must_hold_eventually(
            lambda: router_checks.recorded_by(session, deployment, other),
            bounds.eventual_consistency_s,
            bounds.poll_interval_s,
            f"a request prefilled by {other.engine_id} once a decode worker joined its {level} (the preferred prefill "
            "workers must follow the decode workers present now)",
        )
        truth = GroundTruth(session)
        await truth.refresh(deployment.workers)
        truth.records.clear()  # NB: read up to now: only the requests below are judged
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=6, truth=truth)
    what = f"two prefill workers in two {level}s, policy=fail, a decode worker joined the second one's {level}"
    assertions.requests_must_succeed(run.outcomes, what)
    _both_must_be_chosen(run.transfers(), near, other, f"{what}: both prefill workers now have a same-{level} decode worker")
    assertions.transfers_must_stay_within(run.transfers(), level, what)


async def _check_decode_leaves(ctx: TestContext, level: str) -> None:
    workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0), shapes.decode(level, 1, "leaving")]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    near, other, leaving = deployment.workers[0], deployment.workers[1], deployment.workers[3]
    async with aiohttp.ClientSession() as session:
        before = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=6)
        what = f"two prefill workers in two {level}s, each beside a decode worker, policy=fail"
        assertions.requests_must_succeed(before.outcomes, what)
        _both_must_be_chosen(before.transfers(), near, other, f"{what}: both prefill workers have a same-{level} decode worker")
        await deployment.remove_worker(leaving)
        await asyncio.sleep(ctx.timeouts.eventual_consistency_s)  # NB: no request can tell a router that saw the leave
        truth = GroundTruth(session)
        await truth.refresh([near, other, deployment.workers[2]])
        truth.records.clear()  # NB: read up to now: only the requests below are judged
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=6, truth=truth)
    what = f"two prefill workers in two {level}s, policy=fail, the second one's same-{level} decode worker left"
    assertions.requests_must_succeed(run.outcomes, what)
    sources = {t.source for t in run.transfers()}
    assert sources == {near.engine_id}, (
        f"{what}: only {near.engine_id} still has a decode worker in its {level}, so only it may be chosen; "
        f"KV came from {sorted(sources)}"
    )


def _both_must_be_chosen(transfers: Sequence[Transfer], near: WorkerRef, other: WorkerRef, why: str) -> None:
    sources = {t.source for t in transfers}
    assert sources == {near.engine_id, other.engine_id}, (
        f"{why}, so both are eligible alike, but in {REQUESTS} requests at concurrency 6 KV came only from {sorted(sources)}"
    )


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillPreselection",
    description="Seed 000 row 4, both policies: prefill workers with a decode worker in their domain are preferred; "
    "when there are none, every prefill worker is eligible.",
    features=(
        features.DISAGGREGATED_SERVING,
        features.KV_TRANSFER_TOPOLOGY_FILTER,
        features.KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION,
    ),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Filter for prefill workers that have decode workers in the same domain first and then fallback to all other prefill workers "
        "(window where a decode worker can join).",
        note="The fallback column says 'Same as fail', so the prefers shape runs under both policies.",
    ),
    cases=(
        *(
            shapes.level_case(f"{level}-{policy}", {"level": level, "policy": policy, "shape": PREFERS})
            for level in shapes.LEVELS
            for policy in shapes.POLICIES
        ),
        *(shapes.level_case(f"{level}-unset", {"level": level, "policy": None, "shape": PREFERS}) for level in shapes.LEVELS),
        *(
            shapes.level_case(f"{level}-{shape}", {"level": level, "policy": policy, "shape": shape})
            for shape, policy in ((UNLABELLED_DECODE, "fail"), (OTHERWISE_ALL, "fallback"), (DECODE_JOINS, "fail"), (DECODE_LEAVES, "fail"))
            for level in shapes.LEVELS
        ),
    ),
    check=check,
)
