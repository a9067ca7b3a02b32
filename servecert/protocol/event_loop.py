"""How the suite's server processes run their event loop: uvloop when installed, asyncio otherwise.

uvloop roughly halves the per-request cost of aiohttp servers and clients, which matters for the
fake engines and the reference frontend on a two-core machine. It is a plain dependency; the
fallback keeps every command working where it cannot be installed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


async def cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended; its cancellation is not re-raised."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
