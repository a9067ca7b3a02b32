"""``servecert bench engine``: how fast one fake engine streams, and how small idle engines are.

Two figures, each against a baseline measured in the same run so noisy shared machines still
give comparable numbers:

1. SSE throughput. One engine process (time scale 0, pinned to one core) serves ``concurrency``
   closed-loop streaming clients in this process (pinned to the other core) for ``seconds``;
   streamed tokens/s are counted at the client. The baseline is a bare aiohttp server
   (``servecert.benchmarks.sse_baseline``) that streams chunks of the same size with no engine behind it,
   measured the same way: the ratio says what the engine costs over aiohttp itself.
2. Idle footprint. One process hosts ``engines`` idle engines, each on its own loopback address;
   once every one answers ``/health``, its RSS is read from /proc. The baseline is the RSS of a
   process hosting a single engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from servecert.benchmarks import processes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--engines", type=int, default=256, help="idle engines in one process")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--skip-idle", action="store_true")
    p.add_argument("--json", type=Path, help="also write the figures here")


@dataclass
class StreamFigures:
    requests: int
    tokens: int
    errors: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def _say(message: str) -> None:
    print(f"[bench engine] {message}", file=sys.stderr, flush=True)


async def _stream_load(url: str, model: str, concurrency: int, seconds: float, max_tokens: int) -> StreamFigures:
    words = [f"w{i}" for i in range(3, 32000)]
    stats = {"requests": 0, "tokens": 0, "errors": 0}

    async def one(session: aiohttp.ClientSession) -> None:
        prompt = " ".join(random.choice(words) for _ in range(64))
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
                "ignore_eos": True, "stream": True}
        async with session.post(url + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                stats["errors"] += 1
                await resp.read()
                return
            n = 0
            async for line in resp.content:
                if line.startswith(b"data: [DONE]"):
                    break
                if line.startswith(b"data:") and b'"finish_reason":null' in line:  # token chunks only
                    n += 1
            stats["tokens"] += n
            stats["requests"] += 1

    async def client(session: aiohttp.ClientSession, end: float) -> None:
        while time.perf_counter() < end:
            await one(session)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await one(session)
        stats.update(requests=0, tokens=0, errors=0)
        start = time.perf_counter()
        await asyncio.gather(*(client(session, start + seconds) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return StreamFigures(stats["requests"], stats["tokens"], stats["errors"], elapsed)


def _measure_stream(cmd: list[str], args: argparse.Namespace, model: str) -> StreamFigures:
    with processes.running(cmd, cpu=0) as (_, urls):
        url = urls[0]
        own = os.sched_getaffinity(0)
        if (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})
        try:
            return asyncio.run(_stream_load(url, model, args.concurrency, args.seconds, args.max_tokens))
        finally:
            os.sched_setaffinity(0, own)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def _all_healthy(urls: list[str]) -> int:
    async with aiohttp.ClientSession() as session:
        async def ok(url: str) -> bool:
            async with session.get(url + "/health") as resp:
                return resp.status == 200
        return sum(await asyncio.gather(*(ok(u) for u in urls)))


def _measure_idle(count: int) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "servecert", "engine", "serve", "--model", "idle", "--port", "0",
           "--host", "127.0.2.1", "--count", str(count)]
    with processes.running(cmd) as (proc, urls):
        if len(urls) != count:
            raise RuntimeError(f"expected {count} engines, saw {len(urls)}")
        healthy = asyncio.run(_all_healthy(urls))
        time.sleep(1.0)
        return _rss_mib(proc.pid), healthy


def run(args: argparse.Namespace) -> int:
    figures: dict[str, object] = {"machine_cpus": os.cpu_count()}
    if not args.skip_throughput:
        _say(f"baseline: bare aiohttp SSE server, {args.concurrency} clients x {args.seconds:g}s ...")
        base = _measure_stream([sys.executable, "-m", "servecert.benchmarks.sse_baseline", "--tokens", str(args.max_tokens)], args, "bench")
        _say(f"baseline: {base.tokens_per_s:,.0f} tokens/s ({base.requests} requests, {base.errors} errors)")
        _say("engine: servecert engine serve --time-scale 0, pinned to one core ...")
        eng = _measure_stream(
            [sys.executable, "-m", "servecert", "engine", "serve", "--model", "bench", "--port", "0", "--time-scale", "0"],
            args,
            "bench",
        )
        _say(f"engine: {eng.tokens_per_s:,.0f} tokens/s ({eng.requests} requests, {eng.errors} errors)")
        figures["sse"] = {
            "concurrency": args.concurrency,
            "max_tokens": args.max_tokens,
            "engine": {**asdict(eng), "tokens_per_s": round(eng.tokens_per_s)},
            "baseline_aiohttp": {**asdict(base), "tokens_per_s": round(base.tokens_per_s)},
            "engine_over_baseline": round(eng.tokens_per_s / base.tokens_per_s, 3) if base.tokens_per_s else None,
            "goal_tokens_per_s": 20000,
        }
    if not args.skip_idle:
        _say("idle: one process hosting a single engine ...")
        one_rss, _ = _measure_idle(1)
        _say(f"idle: {args.engines} engines in one process ...")
        many_rss, healthy = _measure_idle(args.engines)
        _say(f"idle: {healthy}/{args.engines} healthy, RSS {many_rss:.0f} MiB (single engine: {one_rss:.0f} MiB)")
        figures["idle"] = {
            "engines": args.engines,
            "healthy": healthy,
            "rss_mib": round(many_rss, 1),
            "single_engine_rss_mib": round(one_rss, 1),
            "per_extra_engine_mib": round((many_rss - one_rss) / max(1, args.engines - 1), 3),
            "goal_rss_mib": 1024,
        }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0
