"""Continuous streaming traffic through a DGD's address while it rolls out, every request's outcome recorded.

Data flow: ``StreamingTraffic.start()`` runs ``concurrency`` closed-loop senders; each sends a
streaming completion with a prompt no other request shares (``servecert.harness.traffic``), records a
``Sent`` (wall-clock start and end, the ``Outcome`` the client saw: status, error event, tokens,
``[DONE]``), and sends the next one, until ``stop()``, ``max_requests`` or ``max_duration_s``.
A closed loop is right here (unlike the planner's open-loop scenarios): the question is not how
the system copes with a rate but whether any request in flight across the rollout breaks, and a
closed loop keeps ``concurrency`` streams open through every step. ``stop()`` lets the requests in
flight finish (each is bounded by its own timeout) and returns everything sent.

Why exact: the verdict "zero failed requests" needs every request counted, including a stream cut
half-way (``done`` false) or one that ended in an error event after tokens. The locust ``rollout``
profile of nightly runs sends the same requests (``servecert/load/``), through ``servecert load run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import aiohttp

from servecert.harness import traffic
from servecert.protocol import waiting


@dataclass(frozen=True)
class Sent:
    started: float  # wall clock (time.time()), comparable with the engines' ground truth
    ended: float
    outcome: traffic.Outcome

    @property
    def ok(self) -> bool:
        return self.outcome.ok


@dataclass
class StreamingTraffic:
    url: str
    model: str
    concurrency: int = 4
    max_tokens: int = 12
    max_requests: int = 5000
    max_duration_s: float = 600.0
    request_timeout_s: float = 60.0
    tag: str = "roll"
    sent: list[Sent] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _session: aiohttp.ClientSession | None = None
    _deadline: waiting.Deadline | None = None

    async def start(self) -> StreamingTraffic:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True))
        self._deadline = waiting.Deadline(self.max_duration_s)
        self._tasks = [asyncio.create_task(self._sender(i)) for i in range(self.concurrency)]
        return self

    async def _sender(self, index: int) -> None:
        assert self._session is not None and self._deadline is not None
        while not self._stop.is_set() and len(self.sent) < self.max_requests and not self._deadline.expired:
            started = time.time()
            prompt = traffic.unique_prompt(tag=f"{self.tag}{index}")
            outcome = await traffic.complete(
                self._session, self.url, self.model, prompt, max_tokens=self.max_tokens, timeout_s=self.request_timeout_s
            )
            self.sent.append(Sent(started, time.time(), outcome))

    async def stop(self) -> list[Sent]:
        """Stop sending; wait for the requests in flight (each bounded by its timeout); everything sent."""
        self._stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*self._tasks), self.request_timeout_s + 5)
        if self._session is not None:
            await self._session.close()
        return list(self.sent)

    def failed(self) -> list[Sent]:
        return [s for s in self.sent if not s.ok]
