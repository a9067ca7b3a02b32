"""Server processes a benchmark starts: wait for their ``url=`` / ``ready`` lines, stop them by pid."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp

from servecert.protocol import waiting

READY_TIMEOUT_S = 120.0
ROUTABLE_TIMEOUT_S = 60.0
"""How long a frontend may take to list its engines (``wait_routable``)."""


def start(cmd: list[str], cpu: int | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``cmd``; return it with the URLs it printed once it prints ``ready`` (bounded wait)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    if cpu is not None and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(proc.pid, {cpu})
    urls: list[str] = []
    out = proc.stdout
    assert out is not None

    def ready() -> bool:  # NB: readline blocks until the next line, so no pause between reads
        line = out.readline()
        if not line:
            raise RuntimeError(f"{' '.join(cmd[1:6])} exited with {proc.wait()} before it was ready")
        if "url=" in line:
            urls.append(line.split("url=", 1)[1].strip())
        return line.startswith("ready")

    try:
        waiting.until(ready, timeout_s=READY_TIMEOUT_S, what=f"{' '.join(cmd[1:6])} to print ready", interval_s=0)
    except waiting.WaitTimeout as timed_out:
        stop(proc)
        raise RuntimeError(str(timed_out)) from None
    return proc, urls


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def running(cmd: list[str], cpu: int | None = None) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    proc, urls = start(cmd, cpu)
    try:
        yield proc, urls
    finally:
        stop(proc)


async def wait_routable(url: str, workers: int) -> None:
    """Until the reference frontend at ``url`` lists ``workers`` workers in its ``/status`` (bounded wait)."""
    async with aiohttp.ClientSession() as session:

        async def routable() -> bool:
            async with session.get(url + "/status") as resp:
                return len((await resp.json())["workers"]) >= workers

        await waiting.until_async(
            routable, timeout_s=ROUTABLE_TIMEOUT_S, what=f"frontend at {url} to see {workers} workers", interval_s=0.1, error=RuntimeError
        )
