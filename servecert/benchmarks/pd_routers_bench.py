"""``servecert bench pd-routers``: P/D routers side by side on the same engines and the same load.

Each router in turn sits in front of one prefill and one decode fake engine (time scale 0, one
process each, speaking that router's handshake: the suite's runtime API for the reference
frontend, vLLM's ``kv_transfer_params`` for vllm-router, SGLang's bootstrap room for
sglang-router) and is driven by ``servecert/benchmarks/scripts/openai_load.py`` *unchanged* (closed loop,
64-word prompts, streaming) at each requested concurrency. The baseline is the reference
frontend measured in the same run: every other router's figures come with their ratio to it.
Routers that are not installed are skipped with the command that installs them. The load
average before and after each router is printed, since the machine is shared.

The figures are throughput through a whole P/D request (two engine calls and one KV pull per
request), so they measure the router's proxying cost, not its routing quality.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from servecert.adapters.contract import WorkerRef, free_port
from servecert.adapters.pd_routers.deployment import RouterHttp, RouterKind, installed
from servecert.adapters.pd_routers.sglang_router import SglangRouter
from servecert.adapters.pd_routers.vllm_router import VllmRouter
from servecert.benchmarks import processes
from servecert.benchmarks.router_bench import default_load_script, run_load
from servecert.protocol import waiting
from servecert.protocol.engine_api import PD_SERVECERT

MODEL = "bench"
REFERENCE = "reference"
KINDS: dict[str, RouterKind] = {"vllm-router": VllmRouter(), "sglang-router": SglangRouter()}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, action="append", help="repeatable; default 16 and 4")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--router", action="append", choices=[REFERENCE, *KINDS], help="repeatable; default all installed")
    p.add_argument("--load-script", type=Path, default=default_load_script())
    p.add_argument("--json", type=Path)


def _say(message: str) -> None:
    print(f"[bench pd-routers] {message}", file=sys.stderr, flush=True)


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _engines(cli: list[str], protocol: str, folder: str) -> tuple[list[subprocess.Popen[str]], list[WorkerRef]]:
    procs: list[subprocess.Popen[str]] = []
    refs: list[WorkerRef] = []
    for role, host in (("prefill", "127.0.4.21"), ("decode", "127.0.4.22")):
        cmd = [*cli, "engine", "serve", "--model", MODEL, "--role", role, "--port", "0", "--host", host, "--time-scale", "0",
               "--pd-protocol", protocol, "--drain-seconds", "0", "--discovery-dir", folder]  # fmt: skip
        try:
            proc, urls = processes.start(cmd)
        except RuntimeError:
            for started in procs:
                processes.stop(started)
            raise
        procs.append(proc)
        refs.append(WorkerRef(name=role, engine_id=role, url=urls[0], role=role, domains={}))
    return procs, refs


async def _wait_router(base: str, urls: set[str], proc: subprocess.Popen[str], name: str) -> None:
    async with aiohttp.ClientSession() as session:
        http = RouterHttp(base, session)

        async def routable() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} before it routed")
            return await http.routable(urls)

        await waiting.until_async(
            routable, timeout_s=processes.ROUTABLE_TIMEOUT_S, what=f"{name} to route to {sorted(urls)}", interval_s=0.2, error=RuntimeError
        )


def _start_router(name: str, cli: list[str], folder: str, refs: list[WorkerRef]) -> tuple[subprocess.Popen[str], str]:
    if name == REFERENCE:
        proc, (url, *_) = processes.start([*cli, "frontend", "serve", "--port", "0", "--discovery-dir", folder])
        asyncio.run(processes.wait_routable(url, len(refs)))
        return proc, url
    kind = KINDS[name]
    port = free_port()
    prefill = [r for r in refs if r.role == "prefill"]
    decode = [r for r in refs if r.role == "decode"]
    log = Path(folder) / "router.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            kind.argv(port, free_port(), prefill, decode, "round_robin"), stdout=out, stderr=subprocess.STDOUT, text=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(_wait_router(base, {r.url for r in refs}, proc, name))
    except (RuntimeError, waiting.WaitTimeout):
        processes.stop(proc)
        raise RuntimeError(f"{name} did not route; its log: {log.read_text(errors='replace')[-1500:]}") from None
    return proc, base


def one_router(name: str, args: argparse.Namespace) -> dict[str, Any]:
    cli = [sys.executable, "-m", "servecert"]
    protocol = PD_SERVECERT if name == REFERENCE else KINDS[name].pd_protocol
    figures: dict[str, Any] = {"load_average_before": _load_average()}
    with tempfile.TemporaryDirectory(prefix="servecert-bench-pd-") as folder:
        engines, refs = _engines(cli, protocol, folder)
        try:
            router, url = _start_router(name, cli, folder, refs)
            try:
                for conc in args.concurrency or [16, 4]:
                    _say(f"{name} + 1 prefill + 1 decode engine, concurrency {conc}, {args.seconds:g}s ...")
                    figures[str(conc)] = fig = run_load(args.load_script, url, conc, args.seconds, args.max_tokens)
                    _say(f"  {fig}")
            finally:
                processes.stop(router)
        finally:
            for proc in engines:
                processes.stop(proc)
    figures["load_average_after"] = _load_average()
    return figures


def _chosen(args: argparse.Namespace) -> list[str]:
    names = args.router or [REFERENCE, *KINDS]
    chosen = []
    for name in names:
        kind = KINDS.get(name)
        if kind is not None and not installed(kind):
            _say(f"skipping {name}: not installed; {kind.install}")
            continue
        chosen.append(name)
    return chosen


def run(args: argparse.Namespace) -> int:
    if not args.load_script.is_file():
        print(f"servecert bench pd-routers: error: load script not found at {args.load_script}; pass --load-script PATH", file=sys.stderr)
        return 1
    results: dict[str, Any] = {"routers": {}, "ratio_to_reference_req_s": {}}
    try:
        for name in _chosen(args):
            results["routers"][name] = one_router(name, args)
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"servecert bench pd-routers: error: {exc}", file=sys.stderr)
        return 1
    base = results["routers"].get(REFERENCE, {})
    for name, figs in results["routers"].items():
        if name == REFERENCE or not base:
            continue
        results["ratio_to_reference_req_s"][name] = {
            conc: round(fig["req_s"] / base[conc]["req_s"], 3)
            for conc, fig in figs.items()
            if conc.isdigit() and conc in base and base[conc]["req_s"]
        }
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0
