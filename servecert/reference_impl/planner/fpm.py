"""OBSERVE, forward-pass metrics: one SSE subscription to ``/events/fpm`` per engine.

Each engine publishes one record per scheduler iteration (and an idle heartbeat): its
``wall_time`` is the iteration's duration in simulated seconds, 0 for a heartbeat (seed 003).
``FpmFeed.follow`` starts a reader task per engine that parses the records into ``FpmSample``
and keeps the newest ``max_samples`` per engine, stamped with the planner's own monotonic clock
(engines' wall clocks are never compared with ours). The feed reconnects when a stream ends
(the engines bound each subscription), with a pause, until ``unfollow``. Why SSE rather than
polling: every iteration counts for the regression and the time-weighted queue averages, and
polling would see only snapshots.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import aiohttp

from servecert.protocol import event_loop

log = logging.getLogger("servecert.planner.fpm")
RECONNECT_PAUSE_S = 0.2


@dataclass(frozen=True)
class FpmSample:
    """One iteration of one engine; token counts as the engine reported them, time in simulated ms."""

    at: float  # planner's time.monotonic() when received
    iteration_ms: float
    scheduled_prefill_tokens: int
    queued_prefill_tokens: int
    scheduled_decode_kv_tokens: int
    queued_decode_kv_tokens: int
    num_decode_requests: int

    @classmethod
    def from_record(cls, record: dict[str, Any], at: float) -> FpmSample:
        sched = record.get("scheduled_requests") or {}
        queued = record.get("queued_requests") or {}
        return cls(
            at=at,
            iteration_ms=float(record.get("wall_time", 0.0)) * 1000.0,
            scheduled_prefill_tokens=int(sched.get("sum_prefill_tokens", 0)),
            queued_prefill_tokens=int(queued.get("sum_prefill_tokens", 0)),
            scheduled_decode_kv_tokens=int(sched.get("sum_decode_kv_tokens", 0)),
            queued_decode_kv_tokens=int(queued.get("sum_decode_kv_tokens", 0)),
            num_decode_requests=int(sched.get("num_decode_requests", 0)),
        )


class FpmFeed:
    def __init__(self, session: aiohttp.ClientSession, max_samples: int = 4096) -> None:
        self.session = session
        self.max_samples = max_samples
        self.samples: dict[str, deque[FpmSample]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def following(self) -> set[str]:
        return set(self._tasks)

    def follow(self, engine_id: str, url: str) -> None:
        if engine_id in self._tasks:
            return
        self.samples[engine_id] = deque(maxlen=self.max_samples)
        self._tasks[engine_id] = asyncio.get_running_loop().create_task(self._read(engine_id, url), name=f"fpm-{engine_id}")

    async def unfollow(self, engine_id: str) -> None:
        task = self._tasks.pop(engine_id, None)
        self.samples.pop(engine_id, None)
        await event_loop.cancel(task)

    async def close(self) -> None:
        for engine_id in list(self._tasks):
            await self.unfollow(engine_id)

    def last_before(self, engine_id: str, start: float) -> FpmSample | None:
        """The newest sample of one engine received before ``start``."""
        found = None
        for s in self.samples.get(engine_id, ()):
            if s.at >= start:
                break
            found = s
        return found

    def since(self, engine_id: str, start: float) -> list[FpmSample]:
        """Samples of one engine received at or after ``start`` (planner monotonic time)."""
        return [s for s in self.samples.get(engine_id, ()) if s.at >= start]

    async def _read(self, engine_id: str, url: str) -> None:
        while engine_id in self._tasks:
            try:
                async with self.session.get(url + "/events/fpm", timeout=aiohttp.ClientTimeout(total=None, sock_read=60)) as resp:
                    async for line in resp.content:
                        if line.startswith(b"data:"):
                            self._add(engine_id, json.loads(line[5:]))
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                log.debug("fpm stream of %s ended: %r", engine_id, exc)
            await asyncio.sleep(RECONNECT_PAUSE_S)

    def _add(self, engine_id: str, record: dict[str, Any]) -> None:
        buf = self.samples.get(engine_id)
        if buf is not None:
            buf.append(FpmSample.from_record(record, time.monotonic()))
