"""Which prefix blocks each worker holds, from the workers' KV events.

Each prefill or aggregated worker streams ``stored`` / ``removed`` events (block hashes chained
from the first block of a prompt). The index maps a hash to the workers holding it; a request's
overlap with a worker is the number of its leading block hashes that worker holds. Because hashes
are chained, the walk stops at the first miss, and narrowing the candidate set block by block
costs O(blocks x matching workers), not O(blocks x workers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

import aiohttp

from servecert.protocol import event_loop

log = logging.getLogger("servecert.frontend")
RECONNECT_SECONDS = 0.5


class KvIndex:
    def __init__(self) -> None:
        self._holders: dict[int, set[str]] = {}
        self._held: dict[str, set[int]] = {}
        self.last_event: dict[str, int] = {}

    def apply(self, event: dict[str, object]) -> None:
        worker = str(event["engine_id"])
        kind = event["kind"]
        hashes = event.get("block_hashes") or []
        assert isinstance(hashes, list)
        held = self._held.setdefault(worker, set())
        if kind == "stored":
            for h in hashes:
                self._holders.setdefault(int(h), set()).add(worker)
                held.add(int(h))
        elif kind == "removed":
            for h in hashes:
                self._drop(int(h), worker)
                held.discard(int(h))
        elif kind == "cleared":
            self.forget(worker)
        event_id = event.get("event_id")
        if isinstance(event_id, int):
            self.last_event[worker] = event_id

    def forget(self, worker: str) -> None:
        for h in self._held.pop(worker, set()):
            self._drop(h, worker)
        self.last_event.pop(worker, None)

    def _drop(self, block_hash: int, worker: str) -> None:
        holders = self._holders.get(block_hash)
        if holders is not None:
            holders.discard(worker)
            if not holders:
                del self._holders[block_hash]

    def overlaps(self, hashes: Sequence[int]) -> dict[str, int]:
        """Leading blocks of ``hashes`` held, per worker (workers holding none are absent)."""
        out: dict[str, int] = {}
        if not hashes:
            return out
        current = set(self._holders.get(hashes[0], ()))
        depth = 1
        while current:
            for worker in current:
                out[worker] = depth
            if depth == len(hashes):
                break
            current &= self._holders.get(hashes[depth], set())
            depth += 1
        return out


class KvEventFeed:
    """One subscription per worker to its ``/events/kv`` SSE stream, feeding the index."""

    def __init__(self, index: KvIndex, session: aiohttp.ClientSession) -> None:
        self.index = index
        self.session = session
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def follow(self, engine_id: str, url: str) -> None:
        if engine_id not in self._tasks:
            self._tasks[engine_id] = asyncio.get_running_loop().create_task(self._run(engine_id, url))

    async def unfollow(self, engine_id: str) -> None:
        task = self._tasks.pop(engine_id, None)
        await event_loop.cancel(task)
        self.index.forget(engine_id)

    async def close(self) -> None:
        for engine_id in list(self._tasks):
            await self.unfollow(engine_id)

    async def _run(self, engine_id: str, url: str) -> None:
        while True:  # reconnects until unfollowed (cancelled)
            since = self.index.last_event.get(engine_id, 0)
            try:
                async with self.session.get(f"{url}/events/kv?since={since}", timeout=aiohttp.ClientTimeout(total=None)) as resp:
                    async for line in resp.content:
                        if line.startswith(b"data: "):
                            self.index.apply(json.loads(line[6:]))
            except (aiohttp.ClientError, ValueError, TimeoutError) as exc:
                log.debug("KV event stream of %s interrupted: %r", engine_id, exc)
            await asyncio.sleep(RECONNECT_SECONDS)
