"""Ground truth of the engines' iterations: every forward pass an engine published on ``/events/fpm``.

A planner scales on its own estimates. A check that asks when a conformant planner *could* have
seen an overload needs what the engines really did, not what the planner believed. The suite's
fake engines publish one record per iteration (seed 003, Forward Pass Metrics: ``wall_time`` is
"per-iteration execution time", in simulated seconds, 0 for an idle heartbeat). An iteration that
decodes gives every request it decodes one token, so the time from one decoding pass to the next is
the ITL those requests saw: ``wall_time`` plus whatever the engine spent beyond it, which a
planner's perf model (fitted on ``wall_time``) does not see.

    FpmRecord.follow(workers) -- one SSE subscription per engine --> passes (t on the record's clock)
    FpmRecord.decode_cadence_s(engine, start, end) -> the engine's time from one decoding pass to the next

Subscriptions end with ``close()``; a dropped stream is reopened at most ``RECONNECTS`` times. An
engine whose stream never answers (an implementation's worker without the fakes' endpoint) simply
has no passes, and a check reading it gets None.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from servecert.adapters.contract import WorkerRef
from servecert.protocol import event_loop

log = logging.getLogger("servecert.fpm_record")
RECONNECTS = 20
RECONNECT_PAUSE_S = 0.05
SUBSCRIPTION_S = 3600  # the fakes' cap on one subscription; the record closes long before


@dataclass(frozen=True)
class Pass:
    t: float  # real seconds since the record's t0, when the suite received it
    engine_id: str
    decode_requests: int
    wall_time_s: float  # simulated seconds the iteration took; 0 for an idle heartbeat


@dataclass
class FpmRecord:
    session: aiohttp.ClientSession
    t0: float = field(default_factory=time.monotonic)
    passes: list[Pass] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def follow(self, workers: Sequence[WorkerRef]) -> None:
        """Subscribe to each worker's forward passes from now on."""
        loop = asyncio.get_running_loop()
        for w in workers:
            self.followed.append(w.engine_id)
            self._tasks.append(loop.create_task(self._read(w.engine_id, w.url), name=f"fpm-{w.engine_id}"))

    async def close(self) -> None:
        for task in self._tasks:
            await event_loop.cancel(task)
        self._tasks = []

    def engines(self) -> set[str]:
        """The followed engines that published at least one pass."""
        return {p.engine_id for p in self.passes}

    def decode_cadence_s(self, engine_id: str, start: float, end: float) -> float | None:
        """The engine's mean time from one decoding iteration to the next in [start, end) (real seconds on the record's
        clock), as the suite received them: the inter-token latency its running requests saw there, including what the
        engine spent beyond ``wall_time``. Only back-to-back decoding passes count (an engine with running sequences
        starts its next iteration at once). None with fewer than two."""
        gaps = [
            b.t - a.t
            for a, b in itertools.pairwise(p for p in self.passes if p.engine_id == engine_id and start <= p.t < end)
            if a.decode_requests and b.decode_requests and b.wall_time_s > 0
        ]
        return sum(gaps) / len(gaps) if gaps else None

    async def _read(self, engine_id: str, url: str) -> None:
        for _ in range(RECONNECTS):
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                async with self.session.get(
                    f"{url}/events/fpm?max_seconds={SUBSCRIPTION_S}", timeout=aiohttp.ClientTimeout(total=None, sock_read=60)
                ) as resp:
                    if resp.status != 200:
                        log.info("no forward-pass stream from %s (HTTP %d): no ground truth of its iterations", engine_id, resp.status)
                        return
                    async for line in resp.content:
                        if line.startswith(b"data:"):
                            self._add(engine_id, json.loads(line[5:]))
            await asyncio.sleep(RECONNECT_PAUSE_S)

    def _add(self, engine_id: str, record: dict[str, object]) -> None:
        scheduled = record.get("scheduled_requests")
        decoding = int(scheduled.get("num_decode_requests", 0)) if isinstance(scheduled, dict) else 0
        wall = record.get("wall_time")
        self.passes.append(Pass(time.monotonic() - self.t0, engine_id, decoding, float(wall) if isinstance(wall, (int, float)) else 0.0))
