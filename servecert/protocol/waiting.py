"""The one wait primitive: poll a probe until it holds, or hold a condition for a while, bounded.

Every bounded wait in the tree (the suite, the fixtures, the fakes, the reference
implementation, the benchmarks and ``tests/``) goes through here, so each has the same shape:
a bound in seconds (``Deadline``), a poll interval, a message that names what was awaited, the
bound, and the last thing seen. Data flow::

    Deadline(seconds)             started + bound, read with remaining() / expired / elapsed()
    until(probe, timeout_s=...)   probe() until truthy -> its value; else error(message)
    until_async(probe, ...)       the same on an event loop; probe may be sync or async
    holding(seconds, interval)    the ticks of a window (a condition that must *stay* true)
    every_async(interval)         fixed-rate ticks for a periodic loop (no drift)

Why one: seven copies had drifted apart (some swallowed every exception, some none; some named
the last observation, some not; intervals from 0.05 to 1 s). Errors default to ``WaitTimeout``
(an ``AssertionError``, so a conformance check that times out fails rather than errors);
callers in the fixtures pass their own error type with ``error=``.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar, overload

T = TypeVar("T")

DEFAULT_INTERVAL_S = 0.2
LAST_SEEN_MAX = 500


class WaitTimeout(AssertionError):
    """A bounded wait ran out: the message names what was awaited, the bound and the last value seen."""


class Deadline:
    """A bound in time, from now: ``Deadline(5.0).expired`` is true five seconds later."""

    __slots__ = ("at", "seconds", "started")

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, float(seconds))
        self.started = time.monotonic()
        self.at = self.started + self.seconds

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class _Tally:
    """One bounded wait's state: the deadline, the last value and error seen, the streak of truths."""

    def __init__(self, timeout_s: float, consecutive: int) -> None:
        self.deadline = Deadline(timeout_s)
        self.consecutive = consecutive
        self.last: object = None
        self.failure = ""
        self.streak = 0

    def answered(self, value: object) -> bool:
        """Count an answer; True once ``consecutive`` truthy ones came in a row."""
        self.last, self.failure = value, ""
        self.streak = self.streak + 1 if value else 0
        return self.streak >= self.consecutive

    def failed(self, exc: BaseException) -> None:
        self.streak, self.failure = 0, f"{type(exc).__name__}: {exc}"

    def pause(self, interval_s: float, what: str, describe: Callable[[], str] | None, error: Callable[[str], BaseException]) -> float:
        """The seconds to sleep before the next probe; past the deadline, raise ``error`` with what was seen."""
        if self.deadline.expired:
            seen = f"; last seen: {str(self.last)[:LAST_SEEN_MAX]}" if self.last not in (None, False, "") else ""
            failure = f"; last error: {self.failure[:LAST_SEEN_MAX]}" if self.failure else ""
            detail = f"; {describe()}" if describe is not None else ""
            raise error(f"{what}: not within {self.deadline.seconds:g}s{seen}{failure}{detail}")
        return min(interval_s, max(self.deadline.remaining(), 0.001))


def until(
    probe: Callable[[], T],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = DEFAULT_INTERVAL_S,
    consecutive: int = 1,
    tolerate: tuple[type[BaseException], ...] = (),
    describe: Callable[[], str] | None = None,
    error: Callable[[str], BaseException] = WaitTimeout,
) -> T:
    """Call ``probe`` every ``interval_s`` until it returns something truthy ``consecutive`` times
    in a row; return that value. Exceptions in ``tolerate`` count as a falsy answer (their text
    goes in the message). Past ``timeout_s`` (probed at least once), raise ``error(message)``."""
    tally = _Tally(timeout_s, consecutive)
    while True:
        try:
            value = probe()
        except tolerate as exc:
            tally.failed(exc)
        else:
            if tally.answered(value):
                return value
        time.sleep(tally.pause(interval_s, what, describe, error))


@overload
async def until_async(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = ...,
    consecutive: int = ...,
    tolerate: tuple[type[BaseException], ...] = ...,
    describe: Callable[[], str] | None = ...,
    error: Callable[[str], BaseException] = ...,
) -> T: ...


@overload
async def until_async(
    probe: Callable[[], T],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = ...,
    consecutive: int = ...,
    tolerate: tuple[type[BaseException], ...] = ...,
    describe: Callable[[], str] | None = ...,
    error: Callable[[str], BaseException] = ...,
) -> T: ...


async def until_async(
    probe: Callable[[], Any],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = DEFAULT_INTERVAL_S,
    consecutive: int = 1,
    tolerate: tuple[type[BaseException], ...] = (),
    describe: Callable[[], str] | None = None,
    error: Callable[[str], BaseException] = WaitTimeout,
) -> Any:
    """``until`` on an event loop: ``probe`` may be a coroutine function or a plain one."""
    tally = _Tally(timeout_s, consecutive)
    while True:
        try:
            answer = probe()
            value = await answer if inspect.isawaitable(answer) else answer
        except tolerate as exc:
            tally.failed(exc)
        else:
            if tally.answered(value):
                return value
        await asyncio.sleep(tally.pause(interval_s, what, describe, error))


def holding(seconds: float, interval_s: float = DEFAULT_INTERVAL_S) -> Iterator[float]:
    """The ticks of a window of ``seconds``: yields the time elapsed, then sleeps ``interval_s``.

    For conditions that must stay true: ``for _ in holding(5): assert not ready()``. The first
    tick comes at once, the last no later than the window's end."""
    deadline = Deadline(seconds)
    while True:
        yield deadline.elapsed()
        if deadline.expired:
            return
        time.sleep(min(interval_s, max(deadline.remaining(), 0.001)))


async def holding_async(seconds: float, interval_s: float = DEFAULT_INTERVAL_S) -> AsyncIterator[float]:
    """``holding`` on an event loop."""
    deadline = Deadline(seconds)
    while True:
        yield deadline.elapsed()
        if deadline.expired:
            return
        await asyncio.sleep(min(interval_s, max(deadline.remaining(), 0.001)))


async def every_async(interval_s: float) -> AsyncIterator[int]:
    """Fixed-rate ticks: the n-th comes ``n * interval_s`` after the start (a slow tick does not
    shift the later ones; missed ticks come at once). Unbounded: the caller's task is cancelled."""
    start = time.monotonic()
    for n in itertools.count(1):
        await asyncio.sleep(max(0.0, start + n * interval_s - time.monotonic()))
        yield n
