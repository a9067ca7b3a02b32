"""Many fake engines in one process, each on its own loopback address and port.

127.0.0.0/8 is all loopback, so engine i of a group can listen on its own 127.x.y.z address
(the way every pod has its own IP) while sharing one event loop: hundreds of idle engines fit on
two cores. ``EngineHost.add`` serves an engine and returns it with ``engine.url`` set;
``remove`` and ``close`` stop engines and free their sockets. A crashed engine closes its socket
too, so clients see connection refused, as they would from a dead process.

Draining (what a terminating pod does): ``drain`` keeps every engine serving, new requests
included, until none has had work in flight (``server.in_flight``) for ``DRAIN_QUIET_S`` or a
time limit passes; then ``close`` stops them. The caller withdraws the engines from discovery
first, so the quiet moment is what lets a frontend that has not yet noticed stop sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import Callable

from aiohttp import web

from servecert.fakes import server
from servecert.fakes.engine import Engine, EngineConfig
from servecert.protocol import connection_guard, waiting

DRAIN_QUIET_S = 1.0
"""Idle time that ends a drain; longer than a frontend's discovery poll (0.2 s files, 0.3 s Kubernetes) plus a listing."""
DRAIN_POLL_S = 0.05


def addresses(host: str, count: int) -> list[str]:
    """``count`` distinct addresses starting at ``host`` when it is loopback, else ``host`` repeated."""
    start = ipaddress.ip_address(host)
    if count == 1 or not (start.version == 4 and start.is_loopback):
        return [host] * count
    out: list[str] = []
    value = int(start)
    while len(out) < count:
        addr = ipaddress.IPv4Address(value)
        if not addr.is_loopback:
            raise ValueError(f"not enough loopback addresses after {host} for {count} engines")
        if value & 0xFF not in (0, 255):
            out.append(str(addr))
        value += 1
    return out


class EngineHost:
    def __init__(self, on_crash: Callable[[Engine], None] | None = None, limits: connection_guard.Limits | None = None) -> None:
        self._limits = limits
        self._runners: dict[str, web.AppRunner] = {}
        self.engines: list[Engine] = []
        self._on_crash = on_crash
        self._tasks: set[asyncio.Task[None]] = set()

    async def add(self, config: EngineConfig, host: str = "127.0.0.1", port: int = 0) -> Engine:
        engine = Engine(config)
        app = server.create_app(engine, self._limits)
        runner = await connection_guard.start_runner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        bound = runner.addresses[0][1]
        engine.url = f"http://{host}:{bound}"
        engine.on_crash = self._crashed
        self._runners[engine.engine_id] = runner
        self.engines.append(engine)
        return engine

    async def remove(self, engine: Engine) -> None:
        runner = self._runners.pop(engine.engine_id, None)
        if engine in self.engines:
            self.engines.remove(engine)
        if runner is not None:
            await runner.cleanup()

    def in_flight(self, engine: Engine | None = None) -> int:
        """Work in flight of ``engine`` (0 once it is no longer served), or summed over every engine still served."""
        if engine is None:
            return sum(server.in_flight(runner.app) for runner in self._runners.values())
        runner = self._runners.get(engine.engine_id)
        return server.in_flight(runner.app) if runner is not None else 0

    async def drain(
        self, limit_s: float, quiet_s: float = DRAIN_QUIET_S, interrupt: asyncio.Event | None = None, engine: Engine | None = None
    ) -> int:
        """Keep serving until nothing was in flight for ``quiet_s``, ``limit_s`` passed, or ``interrupt`` is set.

        Only ``engine``'s work counts when one is given (one terminating pod among many). Returns the
        work still in flight when it gave up (0: drained).
        """
        deadline = waiting.Deadline(limit_s)
        quiet_since: float | None = None
        for _ in range(int(limit_s / DRAIN_POLL_S) + 2):  # NB: each turn waits DRAIN_POLL_S unless it is the last
            now = time.monotonic()
            busy = self.in_flight(engine)
            quiet_since = None if busy else (now if quiet_since is None else quiet_since)
            if quiet_since is not None and now - quiet_since >= quiet_s:
                return 0
            if now >= deadline.at or (interrupt is not None and interrupt.is_set()):
                return busy
            await _wait(interrupt, min(DRAIN_POLL_S, deadline.at - now))
        return self.in_flight(engine)

    async def close(self) -> None:
        for engine in list(self.engines):
            await self.remove(engine)
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _crashed(self, engine: Engine) -> None:
        task = asyncio.get_running_loop().create_task(self._close_crashed(engine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_crashed(self, engine: Engine) -> None:
        runner = self._runners.pop(engine.engine_id, None)
        if runner is not None:
            await runner.cleanup()
        if self._on_crash is not None:
            self._on_crash(engine)


async def _wait(event: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``event`` is set."""
    if event is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=seconds)
