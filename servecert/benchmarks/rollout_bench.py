"""``servecert bench rollout``: one block-size rollout of the suite's DGD under streaming load, and what the proxy costs.

Figures (never pass/fail), on an embedded cluster this command starts and takes down by name:

1. the rollout (ROLLOUT-ISOLATION's ``RolloutBlockSize`` scenario, run by the suite's own code
   against the reference operator): requests sent and failed, seconds from the spec change to the
   new version alone, the new version's observed share of served requests per second (from the
   engines' ground truth), the weights HAProxy had, sampled every 0.1 s from its runtime API, and
   how long after each worker change the weights followed (``proxy_weight_sampler``), the steps
   the operator reported (its Events on the DGD), and the verdict (the broken rules, empty when clean);
2. the proxy's cost, after the rollout: ``--requests`` streaming completions sent one at a time,
   in turn straight to the frontend pod, to one HAProxy replica's pod, and through the DGD's address
   (its Service: the embedded cluster's Python kube-proxy, ``servecert.fakes.service_proxy``, then HAProxy),
   from this process: median time to first token and to the end of the stream each way, and the
   ratios to direct — the baseline is measured in the same run, so the figure survives a noisy
   machine; the Service's hop is the embedded cluster's, not the implementation's;
3. with ``--locust-users N``: locust's ``rollout`` load profile (``servecert load run rollout``, the
   nightly runs' tool) runs beside the suite's traffic through the same rollout; its report folder
   and ``summary.json`` (requests, failures, goodput) are part of the figures.

It lives in ``servecert/conformance/``, not ``servecert/benchmarks/``, because it drives the suite's own scenario
(benchmarks sit below the suite in the import layers).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from servecert.benchmarks import figures as figures_mod


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=100, help="requests each way for the proxy's cost")
    p.add_argument("--locust-users", type=int, default=0, help="also run locust's rollout profile with this many users (0: off)")
    p.add_argument("--locust-duration", type=float, default=60.0, help="seconds of the locust run (it starts before the change)")
    p.add_argument("--locust-report", type=Path, default=Path("reports/load/rollout-bench"), help="the locust run's report folder")
    p.add_argument("--json", type=Path, help="also write the figures here")


def _locust(args: argparse.Namespace, model: str) -> tuple[Callable[[str], None], Callable[[], dict[str, Any]]]:
    """Start ``servecert load run rollout`` against the DGD's address once the suite's traffic runs; then its summary."""
    started: list[subprocess.Popen[bytes]] = []

    def start(url: str) -> None:
        cmd = [sys.executable, "-m", "servecert", "load", "run", "rollout", "--host", url, "--users", str(args.locust_users)]
        cmd += ["--duration", str(args.locust_duration), "--model", model, "--report-dir", str(args.locust_report)]
        started.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def finish() -> dict[str, Any]:
        if not started:
            return {}
        try:
            code = started[0].wait(timeout=args.locust_duration + 120)
        except subprocess.TimeoutExpired:
            started[0].kill()
            code = started[0].wait()
        summary = args.locust_report / "summary.json"
        return {"exit": code, "report": str(args.locust_report), "summary": json.loads(summary.read_text()) if summary.is_file() else None}

    return start, finish


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _timed(session: aiohttp.ClientSession, url: str, model: str) -> tuple[float, float]:
    """(time to first token, time to the end of the stream) of one streaming completion, seconds."""
    from servecert.harness import traffic

    start = time.perf_counter()
    outcome = await traffic.complete(session, url, model, traffic.unique_prompt(tag="bench"), max_tokens=8)
    if not outcome.ok or outcome.ttft_s is None:
        raise RuntimeError(f"a request to {url} failed: {outcome.error or outcome.status}")
    return outcome.ttft_s, time.perf_counter() - start


async def proxy_cost(ways: dict[str, str], model: str, requests: int) -> dict[str, float]:
    """Median TTFT and total per way (``direct`` first: the baseline), requests sent one at a time, ways in turn."""
    ttft: dict[str, list[float]] = {w: [] for w in ways}
    total: dict[str, list[float]] = {w: [] for w in ways}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        for _ in range(requests):
            for way, url in ways.items():
                first, end = await _timed(session, url, model)
                ttft[way].append(first)
                total[way].append(end)
    med = {f"{k}_{w}_ms": round(1000 * statistics.median(v[w]), 2) for k, v in (("ttft", ttft), ("total", total)) for w in v}
    for way in ways:
        if way != "direct":
            med[f"ttft_{way}_over_direct"] = round(statistics.median(ttft[way]) / statistics.median(ttft["direct"]), 3)
            med[f"total_{way}_over_direct"] = round(statistics.median(total[way]) / statistics.median(total["direct"]), 3)
    return med


async def _sampled(env: Any, on_traffic: Callable[[str], None] | None) -> tuple[Any, list[tuple[float, dict[str, int]]]]:
    """The suite's block-size rollout, with the proxy's weights sampled beside it (``proxy_weight_sampler``)."""
    from servecert.benchmarks import proxy_weight_sampler
    from servecert.conformance import scenarios
    from servecert.conformance.suite.timeouts import Timeouts

    sampler = proxy_weight_sampler.WeightSampler(env, scenarios.ROLLOUT_DGD_NAME)
    task = asyncio.create_task(sampler.run())
    try:
        evidence = await scenarios.run_rollout(env, Timeouts(), scenarios.ROLLOUT_BLOCK_SIZE, on_traffic=on_traffic)
    finally:
        sampler.stop()
        await task
    return evidence, sampler.samples


def run(args: argparse.Namespace) -> int:
    from servecert.adapters.reference import operator_install
    from servecert.benchmarks import proxy_weight_sampler
    from servecert.conformance import scenarios
    from servecert.conformance.utils import kube as kc
    from servecert.harness.cluster import embedded, state, topology
    from servecert.harness.cluster.backends import Cluster
    from servecert.harness.cluster_env import ClusterEnvironment, ClusterSession
    from servecert.reference_impl.operator.dgd_pods import PROXY_LABEL, PROXY_PORT

    name = f"bench-rollout-{uuid.uuid4().hex[:6]}"
    figures: dict[str, Any] = {}
    _say(f"cluster {name} ...")
    try:
        cluster_state = embedded.up(name, topology.TopologySpec(), progress=_say)
        cluster = Cluster(name, "embedded", Path(cluster_state.kubeconfig), cluster_state)
        api = cluster.api()
        operator = operator_install.install(api)
        session = ClusterSession(cluster, api, operator)
        env = ClusterEnvironment(session)
        try:
            _say("rolling block size 16 -> 32 under streaming load ...")
            start_locust, finish_locust = _locust(args, scenarios.ROLLOUT_MODEL)
            on_traffic = start_locust if args.locust_users > 0 else None
            evidence, samples = asyncio.run(_sampled(env, on_traffic))
            since = proxy_weight_sampler.since(samples, evidence.changed_at)
            figures["rollout"] = {
                "requests_sent": len(evidence.sent),
                "requests_failed": sum(1 for s in evidence.sent if not s.ok),
                "duration_s": round(evidence.finished_at - evidence.changed_at, 2),
                "observed_new_share_by_second": scenarios.observed_shares(evidence),
                "proxy_weights_by_time": proxy_weight_sampler.trajectory(since, evidence.timeline, evidence.changed_at),
                "weights_follow_workers": proxy_weight_sampler.reaction_times(since, evidence.timeline),
                "operator_steps": [text for _, text in evidence.steps],
                "verdict": scenarios.rollout_verdict(evidence),
            }
            if on_traffic is not None:
                _say("waiting for the locust run to end ...")
                figures["locust"] = finish_locust()
            pods = asyncio.run(kc.pods(env))
            frontend = next(p for p in pods if scenarios.ctype(p) == "frontend" and scenarios.serving(p))
            address = asyncio.run(scenarios.rollout_address(env, scenarios.ROLLOUT_DGD_NAME, 30.0))
            _say(f"proxy cost: {args.requests} requests each way ...")
            haproxy = next(p for p in pods if (p["metadata"].get("labels") or {}).get(PROXY_LABEL) and kc.pod_ready(p))
            ways = {
                "direct": f"http://{frontend['status']['podIP']}:8000",
                "haproxy": f"http://{haproxy['status']['podIP']}:{PROXY_PORT}",
                "service": address,
            }
            figures["proxy"] = asyncio.run(proxy_cost(ways, scenarios.ROLLOUT_MODEL, args.requests))
        finally:
            asyncio.run(env.close())
            session.close()
    finally:
        with contextlib.suppress(state.ClusterStateError):
            embedded.down(name)
    return figures_mod.emit(figures, args.json)
