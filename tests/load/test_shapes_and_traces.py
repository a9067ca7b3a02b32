"""Shapes, arrivals, Mooncake traces and prompts with real prefix reuse."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from servecert.load import prompts
from servecert.load.shapes import arrival_times, tick
from servecert.load.shapes.burst import Burst
from servecert.load.shapes.constant import Constant
from servecert.load.shapes.diurnal import Diurnal
from servecert.load.shapes.ramp import Ramp
from servecert.load.shapes.step import Step
from servecert.load.shapes.trace import TraceReplay, read_jsonl, synthetic, write_jsonl
from servecert.protocol import tokenizer


def test_shapes_give_their_levels() -> None:
    assert Step(10, ((0, 0.25), (5, 1.0))).level(4.9) == 0.25
    assert Step(10, ((0, 0.25), (5, 1.0))).level(5) == 1.0
    assert Ramp(10, ((0, 0.0), (10, 1.0))).level(2.5) == pytest.approx(0.25)
    assert Burst(10, base=0.2, start=3, length=2).level(4) == 1.0
    assert Diurnal(10, period_s=10, low=0.2).level(0) == pytest.approx(0.2)
    assert Diurnal(10, period_s=10, low=0.2).level(5) == pytest.approx(1.0)


def test_tick_follows_the_shape_and_ends_it() -> None:
    shape = Step(10, ((0, 0.25), (5, 1.0)))
    assert tick(shape, 1, 12, 5.0) == (3, 5.0)
    assert tick(shape, 6, 12, 5.0) == (12, 5.0)
    assert tick(shape, 10, 12, 5.0) is None


def test_arrivals_integrate_the_rate() -> None:
    assert len(list(arrival_times(Constant(10), 4.0))) == 40
    assert len(list(arrival_times(Step(10, ((0, 0.5), (5, 1.0))), 4.0))) == 30


def test_shared_hash_ids_give_a_shared_token_prefix_and_nothing_more() -> None:
    a = tokenizer.encode(prompts.trace_prompt((1, 2, 3), 48, 16))
    b = tokenizer.encode(prompts.trace_prompt((1, 2, 9), 48, 16))
    assert len(a) == len(b) == 48
    assert a[:32] == b[:32] and a[32:] != b[32:]
    assert len(tokenizer.encode(prompts.unique_prompt(256))) == 256


def test_a_trace_round_trips_and_a_bad_line_is_named(tmp_path: Path) -> None:
    entries = synthetic(20, rate_rps=2.0, block_tokens=64)
    path = write_jsonl(entries, tmp_path / "t.jsonl")
    assert read_jsonl(path) == entries
    replay = TraceReplay(tuple(entries), speedup=2.0)
    times = [t for t, _ in replay.arrivals()]
    assert times == sorted(times) and times[0] == 0.0
    assert any(set(x.hash_ids) & set(y.hash_ids) for x, y in itertools.pairwise(entries))
    path.write_text(path.read_text() + "{not json}\n")
    with pytest.raises(ValueError, match=r"t\.jsonl:21"):
        read_jsonl(path)
