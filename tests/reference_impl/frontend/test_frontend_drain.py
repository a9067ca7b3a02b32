"""A terminating reference frontend finishes its streams before it exits.

Why: a rolling update deletes frontend pods while SSE streams run through them, and the suite
asserts zero failed requests. One engine process (file discovery, ``constant:50:100`` timing at
time scale 1: a 25-token stream takes ~2.5 s) serves the module; each test starts its own frontend
process, streams through it and SIGTERMs it ~0.5 s in. Processes bind 127.0.77.x addresses
distinct per test and pytest-xdist worker, on free ports. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from servecert.fakes import groundtruth
from servecert.harness import traffic
from servecert.protocol import waiting
from tests.conftest import ServeProcess, serve_process, started
from tests.drain_helpers import address, exited

MODEL = "m"
STREAM_TOKENS = 25
LONG_STREAM_TOKENS = 100  # ~10 s: a drain would wait for it, a cut does not
SIGNAL_AFTER_S = 0.5
EXIT_WAIT_S = 10.0


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """One slow engine publishing into a discovery folder: (that folder, its ground-truth file)."""
    root = tmp_path_factory.mktemp("frontend-drain")
    folder, truth = root / "workers", root / "engine.jsonl"
    args = ("--model", MODEL, "--host", address(10), "--port", "0", "--time-scale", "1", "--timing", "constant:50:100")
    with serve_process(*args, "--discovery-dir", str(folder), "--groundtruth-file", str(truth), "--drain-seconds", "0"):
        yield folder, truth


@contextmanager
def frontend(slot: int, folder: Path, *args: str) -> Iterator[ServeProcess]:
    """``servecert frontend serve`` with POD_NAME set, until it prints ``ready``; killed by pid if still running at the end."""
    cmd = [sys.executable, "-m", "servecert", "frontend", "serve", "--host", address(slot), "--port", "0"]
    with started([*cmd, "--discovery-dir", str(folder), *args], {"POD_NAME": f"frontend-pod-{slot}"}, kill=True) as served:
        yield served


async def routable(http: aiohttp.ClientSession, url: str) -> None:
    """Wait (bounded) until the frontend's discovery found the engine."""

    async def discovered() -> bool:
        async with http.get(url + "/status") as resp:
            return bool((await resp.json())["workers"])

    await waiting.until_async(discovered, timeout_s=10.0, what="the frontend to discover the engine", interval_s=0.05)


async def test_sigterm_mid_stream_lets_the_stream_finish_and_refuses_new_connections(workers: tuple[Path, Path]) -> None:
    folder, truth = workers
    with frontend(11, folder) as served:
        url = served.urls[0]
        async with aiohttp.ClientSession() as http:
            await routable(http, url)
            prompt = traffic.unique_prompt()
            task = asyncio.create_task(traffic.complete(http, url, MODEL, prompt, max_tokens=STREAM_TOKENS))
            await asyncio.sleep(SIGNAL_AFTER_S)
            assert not task.done()
            signalled = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            async with aiohttp.ClientSession() as other:
                refused = await traffic.complete(other, url, MODEL, traffic.unique_prompt(), max_tokens=1, timeout_s=5)
            out = await asyncio.wait_for(task, 20)
        finished = time.monotonic()
        code = await exited(served.proc, EXIT_WAIT_S)
        closed = time.monotonic()
        stdout, stderr = served.proc.communicate(timeout=5)
    assert out.ok and out.tokens == STREAM_TOKENS, out
    assert finished - signalled > 1.0, "the stream ran on well after the signal"
    assert refused.error is not None and refused.error["code"] == "transport", refused
    assert code == 0, stderr
    assert closed - finished < 3.0, "the frontend exited soon after its last stream"
    assert "draining:" in stdout and "stopped after" in stdout, stdout
    mine = [r for r in groundtruth.read_json_lines(truth) if r["frontend"] == "frontend-pod-11"]
    assert [(r["outcome"], r["completion_tokens"]) for r in mine] == [(groundtruth.OK, STREAM_TOKENS)], "--frontend-id defaults to POD_NAME"


async def test_drain_seconds_zero_cuts_the_stream(workers: tuple[Path, Path]) -> None:
    folder, _ = workers
    with frontend(12, folder, "--drain-seconds", "0") as served:
        url = served.urls[0]
        async with aiohttp.ClientSession() as http:
            await routable(http, url)
            task = asyncio.create_task(traffic.complete(http, url, MODEL, traffic.unique_prompt(), max_tokens=LONG_STREAM_TOKENS))
            await asyncio.sleep(SIGNAL_AFTER_S)
            signalled = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            out = await asyncio.wait_for(task, 20)
        code = await exited(served.proc, EXIT_WAIT_S)
        took = time.monotonic() - signalled
    assert not out.ok and out.tokens < LONG_STREAM_TOKENS, out
    assert code == 0 and took < 5.0, f"exit {code} after {took:.1f} s, not at once"


async def test_a_second_sigterm_cuts_the_streams_a_drain_waits_for(workers: tuple[Path, Path]) -> None:
    folder, _ = workers
    with frontend(13, folder) as served:
        url = served.urls[0]
        async with aiohttp.ClientSession() as http:
            await routable(http, url)
            task = asyncio.create_task(traffic.complete(http, url, MODEL, traffic.unique_prompt(), max_tokens=LONG_STREAM_TOKENS))
            await asyncio.sleep(SIGNAL_AFTER_S)
            signalled = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            assert not task.done(), "still draining after the first signal"
            served.proc.send_signal(signal.SIGTERM)
            out = await asyncio.wait_for(task, 20)
        code = await exited(served.proc, EXIT_WAIT_S)
        took = time.monotonic() - signalled
    assert not out.ok and out.tokens < LONG_STREAM_TOKENS, out
    assert code == 0 and took < 5.0, f"exit {code} after {took:.1f} s, not at the second signal"
