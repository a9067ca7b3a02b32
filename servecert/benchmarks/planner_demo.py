"""``servecert planner demo``: the reference frontend, planner and fake engines, scaled by the suite's harness.

Starts, in this process, what a PLANNER-SCALING scenario deploys — one prefill and one decode
engine of the scenario calibration (``servecert/harness/planner/calibration.py``), the reference frontend
and planner on the Virtual connector, and the ``ScalingHarness`` as its external system (new
engines load their model for ``--startup`` simulated seconds) — and prints the frontend's URL.
With ``--load PROFILE`` it runs ``servecert load run PROFILE`` against it (locust in
subprocesses) and stops when that ends; otherwise it serves until SIGINT/SIGTERM or
``--duration``. On the way out it writes, in ``--report-dir``: ``planner.html`` (the planner's
own report: replicas, load, estimated latency against the SLA), ``scaling.json`` (the harness's
ground truth: engine events, decisions, GPU-seconds) and ``side_by_side.json`` (SLA attainment
from the load run's exact samples, GPU-seconds from the harness, and the verdict). With ``--load``
the demo is judged (``servecert.benchmarks.nightly``): the load run's limits, and GPU-seconds at most those
of the least workers serving the offered load plus one of each; it exits 1 when one is missed.
``--load nightly`` also adds the night to ``reports/nightly/history.jsonl`` and writes
``nightly.html`` (the verdict and the trend across nights).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from servecert.adapters.contract import DeploymentSpec, PlannedDeployment, PlannerSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.benchmarks import nightly
from servecert.harness.planner import calibration as cal
from servecert.harness.planner.scaling_harness import COMPONENTS, ScalingHarness
from servecert.harness.process_env import ProcessEnvironment
from servecert.load import profiles, verdict
from servecert.load import runner as load_runner
from servecert.reference_impl.planner import app as planner_app
from servecert.reference_impl.planner import report as planner_report

GPUS = {"prefill": 1, "decode": 1}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per real second (1 = real time)")
    p.add_argument("--load", metavar="PROFILE", help=f"run this load profile against the demo: {', '.join(sorted(profiles.PROFILES))}")
    p.add_argument("--duration", type=float, help="seconds of load (stretches the profile), or of serving without --load")
    p.add_argument("--users", type=int, help="peak locust users (default: the profile's)")
    p.add_argument("--workers", type=int, default=0, help="locust worker processes (0 = one process)")
    p.add_argument("--report-dir", type=Path, help="default reports/nightly/<date>/ with --load nightly, else reports/planner-demo/<time>")
    p.add_argument("--load-interval", type=float, default=5.0, help="simulated seconds")
    p.add_argument("--throughput-interval", type=float, default=30.0, help="simulated seconds")
    p.add_argument("--startup", type=float, default=10.0, help="model-load time of added engines, simulated seconds")
    p.add_argument("--gpu-budget", type=int, default=10)
    p.add_argument("--predictor", choices=["constant", "arima", "kalman"], default="constant")
    p.add_argument("--warmup-trace", help="Mooncake JSONL of past arrivals the planner's load predictor starts from")


def _worker(role: str, startup: float = 0.0) -> WorkerSpec:
    return WorkerSpec(role=role, domains=cal.DOMAINS, startup_seconds=startup, max_num_batched_tokens=cal.MAX_NUM_BATCHED_TOKENS)


def run(args: argparse.Namespace) -> int:
    if args.report_dir is None:
        args.report_dir = load_runner.default_dir(args.load or "planner-demo")
        if args.load != "nightly":
            args.report_dir = Path("reports") / "planner-demo" / args.report_dir.name
    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    planner = PlannerSpec(
        ttft_ms=cal.TTFT_MS, itl_ms=cal.ITL_MS, isl=cal.ISL, osl=cal.OSL, load_interval_s=args.load_interval,
        throughput_interval_s=args.throughput_interval, max_gpu_budget=args.gpu_budget, predictor=args.predictor,
        warmup_trace=args.warmup_trace,
    )
    spec = DeploymentSpec(model=cal.MODEL, workers=(_worker("prefill"), _worker("decode")), time_scale=args.time_scale,
                          timing=cal.TIMING, planner=planner)
    env = ProcessEnvironment()
    deployment = await ReferenceImplementation().deploy(spec, env)
    if not isinstance(deployment, PlannedDeployment):
        raise RuntimeError("the reference deployment did not start its planner")
    harness = ScalingHarness(deployment, {c: _worker(c, args.startup) for c in COMPONENTS}, GPUS)
    harness.start()
    planner_site = await _serve_planner(deployment)
    print(f"planner demo url={deployment.frontend_url}", flush=True)
    if planner_site is not None:
        print(f"planner metrics url={planner_site[1]}/metrics", flush=True)
    print("ready", flush=True)
    code = 0
    load_dir = args.report_dir / "load"
    try:
        if args.load:
            ns = argparse.Namespace(profile=args.load, host=deployment.frontend_url, users=args.users, duration=args.duration,
                                    workers=args.workers, report_dir=load_dir, model=cal.MODEL, spawn_rate=10.0, ttft_ms=None, itl_ms=None,
                                    limit=[], no_limits=False)
            code = await asyncio.to_thread(load_runner.run, ns)
        else:
            await _serve(args.duration)
    finally:
        end = harness.now()
        await harness.close()
        args.report_dir.mkdir(parents=True, exist_ok=True)
        if deployment.planner is not None:
            planner_report.write_html(list(deployment.planner.diagnostics.records), deployment.planner.config,
                                      args.report_dir / "planner.html")
        side = _write_truth(args, harness, end)
        if planner_site is not None:
            await planner_site[0].cleanup()
        await deployment.close()
        await env.close()
    print(f"wrote {args.report_dir}", file=sys.stderr)
    if not args.load or code not in (0, 1):
        return code
    missed = _judge(args, side)
    for reason in missed:
        print(f"servecert planner demo: missed {reason}", file=sys.stderr)
    print(f"servecert planner demo: {'FAILED' if missed else 'passed'}", file=sys.stderr)
    return 1 if missed else 0


def _judge(args: argparse.Namespace, side: dict[str, Any]) -> list[str]:
    """The load run's missed limits and the GPU-seconds bound; with ``nightly``, the night's point and page."""
    profile = profiles.get(args.load).with_duration(args.duration)
    bound = nightly.gpu_seconds_bound(profile, args.users or profile.users, args.time_scale, GPUS, cal.ENGINE_RPS)
    attainment = next((limit.bound for limit in verdict.merged(profile.limits, ()) if limit.figure == "goodput.fraction"), None)
    missed = [*side.get("missed", ["the load run wrote no summary.json"]),
              *nightly.gpu_seconds_missed(side["gpu_seconds_simulated"], bound)]
    side.update(gpu_seconds_bound=bound, sla_attainment_bound=attainment, missed=missed, passed=not missed)
    (args.report_dir / "side_by_side.json").write_text(json.dumps(side, indent=1))
    if args.load == "nightly":
        point = {"date": args.report_dir.name, "passed": not missed, "missed": missed,
                 **{k: side.get(k) for k in ("sla_attainment", "sla_attainment_bound", "error_rate", "gpu_seconds_simulated",
                                             "gpu_seconds_bound", "requests", "run_seconds_real", "peak_workers", "decisions")}}
        point["gpu_seconds"] = point.pop("gpu_seconds_simulated")
        page = nightly.write_page(args.report_dir, point, nightly.record(args.report_dir.parent, point))
        print(f"wrote {page}", file=sys.stderr)
    return missed


async def _serve_planner(deployment: PlannedDeployment) -> tuple[web.AppRunner, str] | None:
    """Serve the planner's /metrics, /diagnostics and /report on a free loopback port."""
    planner = getattr(deployment, "planner", None)
    if planner is None:
        return None
    runner = web.AppRunner(planner_app.create_app(planner), access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _serve(duration: float | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=duration)


def _write_truth(args: argparse.Namespace, harness: ScalingHarness, end: float) -> dict[str, Any]:
    k = args.time_scale
    truth: dict[str, Any] = {
        "time_scale": k,
        "events": [dataclasses.asdict(e) for e in harness.events],
        "decisions": [{"seen_t": d.seen_t, "acked_t": d.acked_t, **dataclasses.asdict(d.decision)} for d in harness.decisions],
        "errors": harness.errors,
    }
    (args.report_dir / "scaling.json").write_text(json.dumps(truth, indent=1))
    side: dict[str, Any] = {
        "planner": "servecert reference planner",
        "gpu_seconds_simulated": harness.gpu_seconds(end) * k,
        "run_seconds_real": end,
        "peak_workers": {c: max((n for _, n in harness.held_counts(c)), default=0) for c in COMPONENTS},
        "decisions": len(harness.decisions),
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    summary = args.report_dir / "load" / "summary.json"
    if summary.is_file():
        data = json.loads(summary.read_text())
        side["requests"] = data.get("requests")
        side["sla_attainment"] = data.get("goodput", {}).get("fraction")
        side["error_rate"] = data.get("error_rate")
        side["sla_thresholds_ms"] = data.get("goodput", {}).get("thresholds_ms")
        side["ttft_ms"] = data.get("ttft_ms")
        side["tpot_ms"] = data.get("tpot_ms")
        side["limits"] = data.get("verdict", {}).get("limits", [])
        side["missed"] = data.get("verdict", {}).get("missed", [])
    (args.report_dir / "side_by_side.json").write_text(json.dumps(side, indent=1))
    return side
