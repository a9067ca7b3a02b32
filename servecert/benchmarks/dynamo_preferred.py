"""``python -m servecert.benchmarks.dynamo_preferred``: Dynamo's preferred weight at weights it accepts.

RouterTopologyPreferredWeight compares weight 0 with weight 5, which Dynamo 1.6.1 refuses
(weights must be in [0, 1]). This repeats that test's measurement — one ``preferred`` prefill
worker, a decode worker in its domain and one across the level, simulated time 1:1, 48 requests
at concurrency 8 — at weights given on the command line (default 0 and 1), and prints the
cross-domain share of KV transfers read from the fake engines' ground truth. Informational only:
it is not a conformance test and writes no report.
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp

from servecert.adapters.contract import PREFERRED, DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.dynamo.adapter import DynamoImplementation
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment

MODEL = "servecert-model"
REQUESTS, CONCURRENCY, MAX_TOKENS = 48, 8, 16


def placement(level: str, side: int) -> dict[str, str]:
    zone = f"z{side}" if level == "zone" else "z0"
    rack = f"{zone}-r{side}" if level in ("zone", "rack") else f"{zone}-r0"
    return {"zone": zone, "rack": rack, "host": f"{rack}-h{side}"}


async def cross_share(level: str, weight: float) -> tuple[float, int]:
    prefill = WorkerSpec(
        role="prefill", domains=placement(level, 0), transfer_enforcement=PREFERRED, transfer_domain=level, preferred_weight=weight
    )
    workers = (prefill, WorkerSpec(role="decode", domains=placement(level, 0)), WorkerSpec(role="decode", domains=placement(level, 1)))
    spec = DeploymentSpec(model=MODEL, router=RouterSpec(topology_level=None), workers=workers, time_scale=1.0, timing="constant:5:3")
    env = ProcessEnvironment()
    deployment = await DynamoImplementation().deploy(spec, env)
    try:
        async with aiohttp.ClientSession() as session:
            await traffic.many(session, deployment.frontend_url, MODEL, REQUESTS, CONCURRENCY, MAX_TOKENS)
            truth = GroundTruth(session)
            await truth.refresh(deployment.workers)
    finally:
        await deployment.close()
        await env.close()
    transfers = truth.transfers()
    return sum(t.crosses(level) for t in transfers) / max(1, len(transfers)), len(transfers)


async def main_async(levels: list[str], weights: list[float], repeat: int) -> None:
    for level in levels:
        for run in range(repeat):
            shares = [await cross_share(level, w) for w in weights]
            cells = "  ".join(f"w={w:g}: {share:.0%} of {n}" for w, (share, n) in zip(weights, shares, strict=True))
            print(f"{level} run {run + 1}: cross-domain share  {cells}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m servecert.benchmarks.dynamo_preferred", description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="zone,rack,host")
    p.add_argument("--weights", default="0,1")
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    asyncio.run(main_async(args.levels.split(","), [float(w) for w in args.weights.split(",")], args.repeat))


if __name__ == "__main__":
    main()
