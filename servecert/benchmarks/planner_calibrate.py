"""``servecert bench planner-calibrate``: how much load one prefill + one decode engine serve within the SLA.

``--agg N`` measures N aggregated engines instead (seed 003's aggregated mode).

PLANNER-SCALING scenarios state load in engines' worth (``servecert/harness/planner/calibration.py``).
This measures it: one prefill and one decode worker of the scenario engines (timing table, ISL
256 ± 25 %, OSL 32 unless ``--isl``/``--isl-spread``/``--osl`` say otherwise), no planner, a constant
open-loop rate for ``--seconds`` simulated seconds at each
``--rps``; printed per rate: the share of requests within the SLA (TTFT 1000 ms, ITL 100 ms
simulated, or ``--ttft-ms``/``--itl-ms``), TTFT and TPOT percentiles. Figures only; the largest rate with >= 95% within SLA is
the calibration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp

from servecert.adapters.contract import DeploymentSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.harness import load_generator
from servecert.harness.planner import calibration as cal
from servecert.harness.process_env import ProcessEnvironment
from servecert.load.shapes.constant import Constant


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rps", type=float, action="append", help="requests per simulated second, repeatable")
    p.add_argument("--seconds", type=float, default=40.0, help="simulated seconds per rate")
    p.add_argument("--time-scale", type=float, default=4.0)
    p.add_argument("--prefill", type=int, default=1)
    p.add_argument("--decode", type=int, default=1)
    p.add_argument("--agg", type=int, default=0, help="aggregated workers instead of prefill + decode (seed 003 --mode agg)")
    p.add_argument("--ttft-ms", type=float, default=cal.TTFT_MS, help="TTFT SLA (simulated ms)")
    p.add_argument("--itl-ms", type=float, default=cal.ITL_MS, help="ITL SLA (simulated ms), judged on each request's TPOT")
    p.add_argument("--isl", type=int, default=cal.ISL, help="prompt tokens per request (the mean)")
    p.add_argument("--isl-spread", type=float, default=cal.ISL_SPREAD, help="each prompt's length varies this fraction around --isl")
    p.add_argument("--osl", type=int, default=cal.OSL, help="output tokens per request")


async def measure(rps: float, args: argparse.Namespace) -> dict[str, float]:
    env = ProcessEnvironment()
    chunk = cal.MAX_NUM_BATCHED_TOKENS
    counts = {"agg": args.agg} if args.agg else {"prefill": args.prefill, "decode": args.decode}
    workers = tuple(WorkerSpec(role, domains=cal.DOMAINS, max_num_batched_tokens=chunk) for role, n in counts.items() for _ in range(n))
    spec = DeploymentSpec(model=cal.MODEL, workers=workers, time_scale=args.time_scale, timing=cal.TIMING)
    deployment = await ReferenceImplementation().deploy(spec, env)
    try:
        arrivals = load_generator.schedule(Constant(args.seconds), rps, args.time_scale, args.isl, args.osl, args.isl_spread)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            results = await load_generator.run(session, deployment.frontend_url, cal.MODEL, arrivals, started=time.perf_counter())
    finally:
        await deployment.close()
        await env.close()
    k = args.time_scale
    warm = [r for r in results if r.sent_s * k > args.seconds / 4 and r.ok and r.ttft_s is not None]
    ttft = sorted(r.ttft_s * k * 1000 for r in warm if r.ttft_s is not None)
    tpot = sorted((r.tpot_s or 0.0) * k * 1000 for r in warm)
    ok = [
        r for r in warm
        if r.ttft_s is not None and r.ttft_s * k * 1000 <= args.ttft_ms and (r.tpot_s or 0) * k * 1000 <= args.itl_ms
    ]

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

    return {
        "rps": rps, "requests": len(results), "failed": sum(not r.ok for r in results), "within_sla": len(ok) / max(1, len(warm)),
        "ttft_p50_ms": statistics.median(ttft) if ttft else float("nan"), "ttft_p95_ms": pct(ttft, 0.95),
        "tpot_p50_ms": statistics.median(tpot) if tpot else float("nan"), "tpot_p95_ms": pct(tpot, 0.95),
    }


def run(args: argparse.Namespace) -> int:
    for rps in args.rps or [1.0, 1.5, 2.0, 2.5, 3.0]:
        print(json.dumps({k: round(v, 3) for k, v in asyncio.run(measure(rps, args)).items()}), flush=True)
    return 0


