"""An engine's iterations keep the simulated schedule: late wake-ups are made up, within a bound, and idling resets it."""

from __future__ import annotations

import asyncio
import time

import pytest

from fakes import pacing, timing
from fakes.engine import Engine, Seq
from tests.conftest import config
from tests.fakes.engine_helpers import WAIT_SECONDS, prompt, request, submit

DECODE_MS = 10.0
TOKENS = 120


def test_a_late_iteration_shortens_the_next_sleep_by_its_lateness() -> None:
    pace = pacing.Pace()
    assert pace.sleep_s(0.010, now=100.0) == pytest.approx(0.010)
    # woke 4 ms late: the next iteration is due 10 ms after the last one was due, so it sleeps 6 ms
    assert pace.sleep_s(0.010, now=100.014) == pytest.approx(0.006)
    assert pace.made_up_s == pytest.approx(0.004) and pace.lost_s == 0.0
    # 25 ms late for a 10 ms iteration (due at 100.020): no sleep at all, and it is due at 100.030; the next one, 1 ms late
    assert pace.sleep_s(0.010, now=100.045) == 0.0
    assert pace.sleep_s(0.010, now=100.031) == pytest.approx(0.009)
    assert pace.made_up_s == pytest.approx(0.004 + 0.010 + 0.001)


def test_lateness_beyond_the_limit_is_given_up_and_counted() -> None:
    pace = pacing.Pace(limit_s=0.05)
    pace.sleep_s(0.01, now=0.0)
    assert pace.sleep_s(0.01, now=0.31) == 0.0  # due at 0.01, 0.30 late: 0.25 given up, 0.05 made up from here on
    assert pace.lost_s == pytest.approx(0.25)
    assert pace.due_s == pytest.approx(0.31 - 0.05 + 0.01)


def test_an_idle_engine_starts_a_new_schedule() -> None:
    pace = pacing.Pace()
    pace.sleep_s(0.01, now=0.0)
    pace.idle()
    assert pace.sleep_s(0.01, now=5.0) == pytest.approx(0.01) and pace.made_up_s == 0.0 and pace.lost_s == 0.0


async def token_times(seq: Seq) -> list[float]:
    """When each of ``seq``'s tokens reached its stream (monotonic seconds)."""
    stamps: list[float] = []

    async def drain() -> None:
        while not seq.stream.done or seq.stream.tokens:
            got = await seq.stream.next_tokens()
            stamps.extend([time.monotonic()] * len(got))

    await asyncio.wait_for(drain(), WAIT_SECONDS)
    return stamps


async def test_a_stream_keeps_the_timing_models_pace_when_the_loop_is_blocked() -> None:
    """A blocking 30 ms step in the loop every 50 ms (a busy machine, for the engine) does not slow the stream: its tokens
    come at the model's decode time on average, where sleeping each iteration's full time would add the blocks (x1.6)."""
    engine = Engine(config(time_scale=1.0, timing=timing.Constant(prefill=DECODE_MS, decode=DECODE_MS)))
    await engine.start()
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            time.sleep(0.03)
            await asyncio.sleep(0.05)

    hogging = asyncio.create_task(hog())
    try:
        stamps = await token_times(submit(engine, request(prompt(16), max_tokens=TOKENS)))
    finally:
        stop.set()
        await hogging
        await engine.stop()
    step_ms = (stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1000
    assert len(stamps) == TOKENS and step_ms < DECODE_MS * 1.15, (step_ms, engine.pace.made_up_s, engine.pace.lost_s)
    assert engine.pace.made_up_s > 0.1 and engine.pace.lost_s == 0.0, engine.pace
