"""fail policy: when the same-domain decode leg fails, the request fails; it is never retried across the domain.

The prefill worker's only same-domain decode worker fails; another decode worker, in another
domain, is healthy. The other-domain worker must receive nothing and every transfer must stay in
the domain: a router that retries a failed decode leg on any decode worker moves KV across the
boundary the level forbids. The decode worker fails in two ways a real one does (the fake
engines' fault injection):

- ``error``: it answers every request with an HTTP error. Every request must fail, and its log
  must show it was tried.
- ``crash``: it dies on its first request (its socket closes; connections are refused after,
  until it is restarted, where the environment restarts it). A retry layer that retries only on
  a refused or cut connection, as generic HTTP clients do, passes the ``error`` case and fails
  this one. The crash cuts at least one request; a request served after a restart, inside the
  domain, is allowed.
- ``stall``: it freezes for ``STALL_S`` seconds on its first request, then serves. A router with a
  per-attempt timeout that retries elsewhere (a client timeout under the routing decision) moves
  the stalled requests' KV across the boundary; under fail they may only wait or fail.

The error and crash cases are sent streamed and not (``-unary``): a retry layer may sit on one
path only (a unary call is easy to replay, a stream is not). The stall case is sent unary: the
fake streams its headers before the first token, so a stalled stream is already the client's.
``STALL_S`` is the suite's number, not the seed's: long enough that a retry on a timeout shorter
than it shows, short against the suite's 30 s request bound.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from servecert import features
from servecert.adapters.contract import WorkerRef
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth
from servecert.protocol import engine_api

STALL_S = 6.0
FAULTS: dict[str, dict[str, Any]] = {
    "error": {"error_rate": 1.0},
    "crash": {"crash_after": 1},
    "stall": {"stall_after": 1, "stall_seconds": STALL_S},
}
STREAMS: dict[str, tuple[bool, ...]] = {"error": (True, False), "crash": (True, False), "stall": (False,)}


async def check(ctx: TestContext) -> None:
    level, fault, stream = ctx.params["level"], ctx.params["fault"], ctx.params["stream"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0, "faulty"), shapes.decode(level, 1, "other-domain")]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    faulty, other = deployment.workers[1], deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{faulty.url}/admin/faults", json=FAULTS[fault]) as resp:
            assert resp.status == 200, f"could not inject faults into {faulty.engine_id}: HTTP {resp.status}"
        outcomes = await traffic.many(session, deployment.frontend_url, shapes.MODEL, 8, concurrency=4, stream=stream)
        what = f"the same-{level} decode worker fails ({fault}), policy=fail, {'streamed' if stream else 'unary'} requests"
        if fault == "stall":
            # NB: a request given up during the stall is recorded once the stalled worker runs again
            await assertions.condition_must_hold_eventually(
                lambda: _recorded_any(session, faulty),
                STALL_S + ctx.timeouts.eventual_consistency_s,
                ctx.timeouts.poll_interval_s,
                f"{what}: the stalled decode worker {faulty.engine_id} records a request (the test saw a slow decode leg)",
            )
        truth = GroundTruth(session)
        # NB: a crashed worker's log may be gone with it; the other two are the evidence
        await truth.refresh([deployment.workers[0], other] if fault == "crash" else deployment.workers)
    if fault == "error":
        assertions.requests_must_fail(outcomes, what)
        tried = [r for r in truth.records if r.get("engine_id") == faulty.engine_id and r.get("outcome") == engine_api.INJECTED_ERROR]
        assert tried, f"{what}: the faulty decode worker {faulty.engine_id} was never tried, so the test saw no failed decode leg"
    elif fault == "crash":
        assert any(not o.ok for o in outcomes), f"{what}: every request succeeded, so the test saw no crashed decode leg"
    elsewhere = [r for r in truth.records if r.get("engine_id") == other.engine_id]
    assert not elsewhere, (
        f"{what}: the decode worker in the other {level} ({other.engine_id}) received {len(elsewhere)} requests, "
        f"e.g. {elsewhere[0].get('request_id')}: a failed decode leg was retried across the {level} boundary"
    )
    assertions.transfers_must_stay_within(truth.transfers(), level, what)


async def _recorded_any(session: aiohttp.ClientSession, worker: WorkerRef) -> bool:
    truth = GroundTruth(session)
    await truth.refresh([worker])
    return bool(truth.records)


def _case_id(level: str, fault: str, stream: bool) -> str:
    parts = [level, *([] if fault == "error" else [fault]), *([] if stream else ["unary"])]
    return "-".join(parts)


TEST = ConformanceTest(
    short_name="RouterTopologyFailedDecodeStaysInDomain",
    description="Under fail, a request whose same-domain decode leg fails (an error answer, a crash, a stall) waits or gets an "
    "error, streamed or not; it is not retried on another domain.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "The default for mismachPolicy will be fail - constraining kv transfers to the same topology domain is a hard "
        "constraint so it makes sense to fail a request if this cannot be satisfied.",
        note="The seed speaks of selection; the suite holds a retry after a failed decode leg to the same hard constraint.",
    ),
    cases=tuple(
        shapes.level_case(_case_id(level, fault, stream), {"level": level, "fault": fault, "stream": stream})
        for level in shapes.LEVELS
        for fault in FAULTS
        for stream in STREAMS[fault]
    ),
    check=check,
)
