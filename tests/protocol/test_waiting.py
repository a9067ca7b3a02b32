"""servecert.protocol.waiting: the one bounded wait, sync and async, and the hold window."""

from __future__ import annotations

import pytest

from servecert.protocol import waiting


def test_until_returns_the_first_truthy_value() -> None:
    answers = iter([0, None, "", 7])
    assert waiting.until(lambda: next(answers), timeout_s=5, what="seven", interval_s=0.001) == 7


def test_until_needs_consecutive_truths() -> None:
    answers = iter([1, 0, 1, 1, 1])
    calls = []

    def probe() -> int:
        calls.append(1)
        return next(answers)

    assert waiting.until(probe, timeout_s=5, what="x", interval_s=0.001, consecutive=2) == 1
    assert len(calls) == 4


class _Falsy(list[int]):
    """A value that is seen but does not count as done."""

    def __bool__(self) -> bool:
        return False


def test_until_names_what_the_bound_the_last_value_and_the_description() -> None:
    with pytest.raises(waiting.WaitTimeout, match=r"the pods: not within 0.05s; last seen: \[1, 2\]; 2 of 3 Ready"):
        waiting.until(lambda: _Falsy([1, 2]), timeout_s=0.05, what="the pods", interval_s=0.01, describe=lambda: "2 of 3 Ready")


def test_until_tolerates_only_the_named_errors_and_reports_the_last() -> None:
    def flaky() -> int:
        raise ConnectionError("refused")

    with pytest.raises(waiting.WaitTimeout, match="last error: ConnectionError: refused"):
        waiting.until(flaky, timeout_s=0.05, what="the port", interval_s=0.01, tolerate=(ConnectionError,))
    with pytest.raises(ConnectionError):
        waiting.until(flaky, timeout_s=0.05, what="the port", interval_s=0.01)


def test_until_raises_the_callers_error_type() -> None:
    class StartError(RuntimeError):
        pass

    with pytest.raises(StartError, match="etcd: not within 0s"):
        waiting.until(lambda: False, timeout_s=0, what="etcd", error=StartError)


def test_until_probes_at_least_once_with_a_zero_bound() -> None:
    assert waiting.until(lambda: "yes", timeout_s=0, what="x") == "yes"


async def test_until_async_takes_coroutines_and_plain_functions() -> None:
    answers = iter([False, True])

    async def probe() -> bool:
        return next(answers)

    assert await waiting.until_async(probe, timeout_s=5, what="x", interval_s=0.001) is True
    assert await waiting.until_async(lambda: 3, timeout_s=5, what="x") == 3
    with pytest.raises(waiting.WaitTimeout, match=r"never: not within 0\.03s"):
        await waiting.until_async(lambda: False, timeout_s=0.03, what="never", interval_s=0.01)


class FakeClock:
    """time.monotonic, time.sleep and asyncio.sleep for servecert.protocol.waiting: sleeping advances the clock.

    So the schedule is judged exactly and no test here depends on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(waiting.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(waiting.time, "sleep", fake.sleep)
    monkeypatch.setattr(waiting.asyncio, "sleep", fake.async_sleep)
    return fake


def test_holding_spans_the_window_and_ends(clock: FakeClock) -> None:
    ticks = [round(t, 6) for t in waiting.holding(0.1, interval_s=0.03)]
    assert ticks == [0.0, 0.03, 0.06, 0.09, 0.1]  # the last tick at the window's end, not past it


async def test_holding_async_spans_the_window(clock: FakeClock) -> None:
    ticks = [round(t, 6) async for t in waiting.holding_async(0.05, interval_s=0.02)]
    assert ticks == [0.0, 0.02, 0.04, 0.05]


def test_until_sleeps_its_interval_and_never_past_the_bound(clock: FakeClock) -> None:
    with pytest.raises(waiting.WaitTimeout):
        waiting.until(lambda: False, timeout_s=0.5, what="x", interval_s=0.2)
    assert clock.sleeps == [0.2, 0.2, 0.1]


def test_deadline(clock: FakeClock) -> None:
    deadline = waiting.Deadline(0.05)
    assert not deadline.expired and round(deadline.remaining(), 6) == 0.05
    clock.sleep(0.06)
    assert deadline.expired and deadline.remaining() == 0 and round(deadline.elapsed(), 6) == 0.06


def test_until_shortens_a_long_last_error() -> None:
    def verbose() -> int:
        raise ConnectionError("x" * 5000)

    with pytest.raises(waiting.WaitTimeout) as timed_out:
        waiting.until(verbose, timeout_s=0, what="the API", tolerate=(ConnectionError,))
    assert "last error: ConnectionError: xxx" in str(timed_out.value)
    assert len(str(timed_out.value)) < waiting.LAST_SEEN_MAX + 100


async def test_every_async_keeps_a_fixed_rate_after_a_slow_tick(clock: FakeClock) -> None:
    async for n in waiting.every_async(0.05):
        if n == 1:
            clock.now += 0.08  # a slow tick: the second comes at once, the third on schedule
        if n == 3:
            break
    assert clock.sleeps == [0.05, 0.0, 0.02]
