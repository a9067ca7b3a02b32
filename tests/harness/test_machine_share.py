"""What a timing-bound scenario asks of the machine: CPU priority, no collection pauses, a measure of loop lag."""

from __future__ import annotations

import asyncio
import gc
import os
import time

import pytest

from servecert.harness import cpu_priority, gc_deferral
from servecert.harness.loop_lag import LoopLag


def test_the_priority_is_raised_for_the_block_and_restored_after() -> None:
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with cpu_priority.raised() as priority:
        during = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    assert priority.before == before and priority.during == during
    if os.geteuid() == 0:
        assert during == max(cpu_priority.HIGHEST, before - cpu_priority.RAISE_BY) < before
        assert "->" in priority.outcome


def test_without_the_right_to_raise_it_the_block_still_runs_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(which: int, who: int, value: int) -> None:
        raise PermissionError("not permitted")

    monkeypatch.setattr(os, "setpriority", refuse)
    with cpu_priority.raised() as priority:
        pass
    assert priority.during == priority.before
    assert "could not be raised" in priority.outcome


def test_no_automatic_collection_runs_within_the_block_and_the_setting_is_restored() -> None:
    assert gc.isenabled()
    with gc_deferral.deferred():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_block_that_raises_still_restores_collection() -> None:
    with pytest.raises(RuntimeError), gc_deferral.deferred():
        raise RuntimeError("scenario failed")
    assert gc.isenabled()


def test_a_stalled_loop_shows_as_lag() -> None:
    async def stall() -> LoopLag:
        lag = LoopLag(period_s=0.005)
        lag.start(limit_s=5.0)
        await asyncio.sleep(0.03)
        time.sleep(0.1)  # NB: blocks the loop, as a long collection pause would
        await asyncio.sleep(0.03)
        await lag.stop()
        return lag

    lag = asyncio.run(stall())
    assert max(lag.lags_s) >= 0.09
    assert "worst" in lag.summary() and "over 20 ms late" in lag.summary()


def test_sampling_ends_at_its_limit_without_stop() -> None:
    async def bounded() -> LoopLag:
        lag = LoopLag(period_s=0.005)
        lag.start(limit_s=0.02)
        await asyncio.sleep(0.2)
        return lag

    lag = asyncio.run(bounded())
    assert 1 <= len(lag.lags_s) <= 5
