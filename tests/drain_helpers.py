"""What the drain tests of the engine and the frontend share: their loopback addresses and waiting for an exit."""

from __future__ import annotations

import os
import subprocess

from servecert.protocol import waiting


def address(slot: int) -> str:
    """127.0.77.x, distinct per test ``slot`` (engine tests 0-9, frontend tests 10-19) and per xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    n = int(worker) if worker.isdigit() else 0
    return f"127.0.77.{10 + (n % 12) * 20 + slot}"


async def exited(proc: subprocess.Popen[str], within_s: float) -> int | None:
    """The exit status once ``proc`` ends, or None after ``within_s`` (polled, bounded)."""
    async for _ in waiting.holding_async(within_s, 0.05):
        code = proc.poll()
        if code is not None:
            return code
    return proc.poll()
