"""``servecert bench router``: the reference frontend's throughput and its routing decision time.

1. Throughput, side by side with the Dynamo 1.6.1 anchor: two fake engines (time scale 0, one
   process) and the reference frontend (another process, file discovery) driven by
   ``openai_load.py`` *unchanged* (closed loop, 64-word prompts, streaming; the project's copy in
   ``servecert/benchmarks/scripts/``, the same bytes as the script behind the Dynamo anchor), at each
   requested concurrency. The baseline, measured in the same run, is the same script straight
   against one engine: the ratio is what the frontend costs. The Dynamo figures the issue quotes
   for this machine (739 req/s and 24,400 tokens/s at 64; 308 req/s at 16; 90 at 4) are printed
   beside ours as a second, external reference.
2. Routing decision time: ``Router.first`` (+ ``Router.decode`` when disaggregated) over 512
   registered workers with a populated KV index, timed per decision in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from servecert.benchmarks import processes
from servecert.protocol import tokenizer
from servecert.protocol.card import ModelCard
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import WorkerInfo
from servecert.reference_impl.frontend.kv_index import KvIndex
from servecert.reference_impl.frontend.router import Router
from servecert.reference_impl.frontend.worker_sets import WorkerSets

DYNAMO_ANCHOR = {64: {"req_s": 739, "tok_s": 24400}, 16: {"req_s": 308}, 4: {"req_s": 90}}


LOAD_SCRIPT_SHA256 = "1c70f3dbec5f3e128a576a92411926e91a8d1b0a5df7bad440db318ccbaf2064"
"""The script behind the Dynamo 1.6.1 anchor figures, kept byte for byte (``tests/benchmarks/test_load_script.py``)."""


def default_load_script() -> Path:
    """The project's own copy of the load script: nothing ``make test`` needs lives outside the repository."""
    return Path(__file__).resolve().parent / "scripts" / "openai_load.py"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, action="append", help="repeatable; default 64, 16, 4")
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--load-script", type=Path, default=default_load_script())
    p.add_argument("--workers", type=int, default=512, help="registered workers for the decision-time figure")
    p.add_argument("--decisions", type=int, default=3000)
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--json", type=Path)


def _say(message: str) -> None:
    print(f"[bench router] {message}", file=sys.stderr, flush=True)


def run_load(script: Path, url: str, concurrency: int, seconds: float, max_tokens: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(script), url, "bench", str(concurrency), str(seconds), str(max_tokens)],
        capture_output=True, text=True, timeout=seconds + 120, check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    if not args.load_script.is_file():
        raise RuntimeError(f"load script not found at {args.load_script}; pass --load-script PATH")
    cli = [sys.executable, "-m", "servecert"]
    results: dict[str, Any] = {"frontend": {}, "direct_engine": {}, "dynamo_1_6_1_anchor": DYNAMO_ANCHOR}
    with tempfile.TemporaryDirectory(prefix="servecert-bench-") as folder:
        engines, engine_urls = processes.start([*cli, "engine", "serve", "--model", "bench", "--port", "0", "--count", "2",
                                       "--host", "127.0.4.1", "--time-scale", "0", "--discovery-dir", folder])
        try:
            frontend, (frontend_url, *_) = processes.start([*cli, "frontend", "serve", "--port", "0", "--discovery-dir", folder])
            try:
                asyncio.run(processes.wait_routable(frontend_url, 2))
                for conc in args.concurrency or [64, 16, 4]:
                    _say(f"frontend + 2 engines, concurrency {conc}, {args.seconds:g}s ...")
                    fig = run_load(args.load_script, frontend_url, conc, args.seconds, args.max_tokens)
                    anchor = DYNAMO_ANCHOR.get(conc, {})
                    fig["ratio_to_dynamo_req_s"] = round(fig["req_s"] / anchor["req_s"], 3) if "req_s" in anchor else None
                    results["frontend"][str(conc)] = fig
                    _say(f"  {fig}")
            finally:
                processes.stop(frontend)
            conc = max(args.concurrency or [64])
            _say(f"baseline: the same script straight at one engine, concurrency {conc} ...")
            direct = run_load(args.load_script, engine_urls[0], conc, args.seconds, args.max_tokens)
            results["direct_engine"][str(conc)] = direct
            front = results["frontend"][str(conc)]
            results["frontend_over_direct_req_s"] = round(front["req_s"] / direct["req_s"], 3) if direct["req_s"] else None
            _say(f"  {direct}")
        finally:
            processes.stop(engines)
    return results


def _worker(i: int, role: str, zone: str) -> WorkerInfo:
    card = ModelCard(served_model_name="bench", worker_type=role)
    return WorkerInfo(
        engine_id=f"{role}-{i}", url=f"http://127.0.5.{i % 250 + 1}:1", namespace="dynamo", role=role, card=card,
        checksum=card.checksum(), protocol_version="1", kv_layout={}, domains={"zone": zone, "rack": f"{zone}-r{i % 8}"},
    )


def decision_times(workers: int, decisions: int, disaggregated: bool) -> dict[str, float]:
    sets, index = WorkerSets(), KvIndex()
    rng = random.Random(1)
    if disaggregated:
        for i in range(workers // 2):
            sets.add(_worker(i, "prefill", f"z{i % 4}"))
            sets.add(_worker(i, "decode", f"z{i % 4}"))
    else:
        for i in range(workers):
            sets.add(_worker(i, "agg", f"z{i % 4}"))
    router = Router(sets, index, "kv", topology.TopologyPolicy("zone" if disaggregated else None))
    prompts = [[rng.randrange(256, 32000) for _ in range(rng.randrange(64, 1024))] for _ in range(64)]
    for n, ids in enumerate(prompts):  # every prompt's prefix is cached on a few workers
        hashes = tokenizer.block_hashes(ids, 16)
        for w in rng.sample(sorted(sets.accepted), 4):
            index.apply({"engine_id": w, "kind": "stored", "block_hashes": hashes[: 1 + n % max(1, len(hashes))], "event_id": n})
    times: list[float] = []
    for k in range(decisions):
        ids = prompts[k % len(prompts)]
        start = time.perf_counter()
        found = router.workers("bench")
        first = router.first(found, ids)
        if disaggregated:
            router.decode(found, first, len(ids))
        times.append(time.perf_counter() - start)
    times.sort()
    return {
        "workers": workers,
        "p50_ms": round(1000 * statistics.median(times), 4),
        "p99_ms": round(1000 * times[int(0.99 * (len(times) - 1))], 4),
        "goal_p99_ms": 1.0,
    }


def run(args: argparse.Namespace) -> int:
    figures: dict[str, Any] = {}
    _say(f"routing decisions over {args.workers} workers ...")
    figures["decision_aggregated"] = decision_times(args.workers, args.decisions, disaggregated=False)
    figures["decision_disaggregated_zone_filter"] = decision_times(args.workers, args.decisions, disaggregated=True)
    _say(f"  aggregated {figures['decision_aggregated']}")
    _say(f"  disaggregated {figures['decision_disaggregated_zone_filter']}")
    if not args.skip_throughput:
        try:
            figures["throughput"] = throughput(args)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            print(f"servecert bench router: error: {exc}", file=sys.stderr)
            return 1
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0
