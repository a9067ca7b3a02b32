"""A terminating fake engine finishes its streams, and its ground truth survives it on disk.

Why: a rolling update deletes worker pods while SSE streams run through them, and the suite
asserts zero failed requests and judges the engines' ground truth after the pods are gone.

The subprocess tests run ``servecert engine serve`` with ``constant:50:100`` timing at time scale
1, so a 25-token stream takes ~2.5 s, and SIGTERM it ~0.5 s into the stream. A stream that must be
cut is 100 tokens (~10 s): closing "at once" still gives handlers aiohttp's shutdown grace (the
runner's 1 s, waited twice: up to ~2 s). Each binds its own 127.0.77.x address (by test and
pytest-xdist worker) on a free port. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from servecert.fakes import groundtruth
from servecert.fakes.engine import Engine
from servecert.fakes.host import EngineHost
from servecert.fakes.timing import Constant
from servecert.harness import traffic
from servecert.protocol import waiting
from tests.conftest import ServeProcess, config, serve_command, started
from tests.drain_helpers import address, exited
from tests.fakes import engine_helpers

MODEL = "m"
STREAM_TOKENS = 25
LONG_STREAM_TOKENS = 100  # ~10 s: a drain would wait for all of it, a cut only for the runner's ~2 s grace
CUT_WITHIN_S = 6.0  # that grace plus slack for a loaded machine, well short of the stream
SLOW = ("--time-scale", "1", "--timing", "constant:50:100")  # 25 tokens: ~2.55 s
SIGNAL_AFTER_S = 0.5
EXIT_WAIT_S = 10.0


@contextmanager
def engine(slot: int, *args: str) -> Iterator[ServeProcess]:
    """``servecert engine serve`` on ``address(slot)`` until it prints ``ready``; killed by pid if still running at the end."""
    with started(serve_command("--model", MODEL, "--host", address(slot), "--port", "0", *args), kill=True) as served:
        yield served


async def stream_with_signals(url: str, proc: subprocess.Popen[str], signals: int = 1) -> tuple[traffic.Outcome, float]:
    """Stream a long completion through ``url``, SIGTERM ``proc`` ``signals`` times, the first ~0.5 s in; (outcome, first signal)."""
    async with aiohttp.ClientSession() as http:
        task = asyncio.create_task(traffic.complete(http, url, MODEL, traffic.unique_prompt(), max_tokens=LONG_STREAM_TOKENS))
        await asyncio.sleep(SIGNAL_AFTER_S)
        assert not task.done(), "the stream ended before the signal: the engine is faster than this test assumes"
        signalled = time.monotonic()
        for _ in range(signals):
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
        return await asyncio.wait_for(task, 20), signalled


async def test_sigterm_mid_stream_withdraws_then_finishes_the_stream_and_the_file_keeps_its_record(tmp_path: Path) -> None:
    workers, truth = tmp_path / "workers", tmp_path / "gt" / "engine.jsonl"
    with engine(0, *SLOW, "--discovery-dir", str(workers), "--groundtruth-file", str(truth)) as served:
        assert list(workers.glob("*.json")), "published while serving"
        async with aiohttp.ClientSession() as http:
            task = asyncio.create_task(traffic.complete(http, served.url, MODEL, traffic.unique_prompt(), max_tokens=STREAM_TOKENS))
            await asyncio.sleep(SIGNAL_AFTER_S)
            signalled = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            await waiting.until_async(  # the withdrawal comes first
                lambda: not list(workers.glob("*.json")), timeout_s=2.0, what="withdrawn from discovery before the drain", interval_s=0.05
            )
            assert not task.done(), "the stream is still running: the request below arrives during the drain"
            late = await traffic.complete(http, served.url, MODEL, traffic.unique_prompt(), max_tokens=3)
            out = await asyncio.wait_for(task, 20)
        finished = time.monotonic()
        code = await exited(served.proc, EXIT_WAIT_S)
        assert code == 0, served.output() if code is not None else "still running after its drain"
        closed = time.monotonic()
        text = served.output()
    assert out.ok and out.tokens == STREAM_TOKENS, out
    assert late.ok, f"a request a frontend still sends while the engine drains is served: {late}"
    assert finished - signalled > 1.0, "the stream outlived the signal by more than a runner's 1 s shutdown grace"
    assert closed - finished < 5.0, "the engine closed soon after its last stream"
    assert "draining:" in text and "drained in" in text, text
    records = groundtruth.read_json_lines(truth.parent)
    mine = [r for r in records if r["prompt_tokens"] and r["completion_tokens"] == STREAM_TOKENS]
    assert len(mine) == 1 and mine[0]["outcome"] == groundtruth.OK, records
    assert len(records) == 2, "the late request is on file too"


async def test_drain_seconds_zero_cuts_the_stream_at_once_and_records_the_abort(tmp_path: Path) -> None:
    truth = tmp_path / "engine.jsonl"
    with engine(1, *SLOW, "--drain-seconds", "0", "--groundtruth-file", str(truth)) as served:
        out, signalled = await stream_with_signals(served.url, served.proc)
        code = await exited(served.proc, EXIT_WAIT_S)
        assert code == 0, served.output() if code is not None else "still running"
        took = time.monotonic() - signalled
        text = served.output()
    assert not out.done and out.tokens < LONG_STREAM_TOKENS, out
    assert took < CUT_WITHIN_S, f"closed {took:.1f} s after the signal: no drain with --drain-seconds 0"
    assert "draining:" not in text, text
    [record] = groundtruth.read_json_lines(truth)
    assert record["outcome"] == groundtruth.ABORTED


async def test_a_second_sigterm_during_the_drain_closes_at_once(tmp_path: Path) -> None:
    with engine(2, *SLOW) as served:
        out, signalled = await stream_with_signals(served.url, served.proc, signals=2)
        code = await exited(served.proc, EXIT_WAIT_S)
        took = time.monotonic() - signalled
        text = served.output()
    assert code == 0, text
    assert not out.done, out
    assert took < CUT_WITHIN_S, f"closed {took:.1f} s after the first signal"
    assert "drain cut by a second signal" in text, text


QUIET_S = 3.0
"""``--drain-quiet-seconds`` of the test below: long enough that "still up" at a third of it cannot be a slow exit."""


async def test_drain_quiet_seconds_keeps_a_withdrawn_idle_engine_up_that_long(tmp_path: Path) -> None:
    """A worker that stays up after it withdrew, as a pod with a preStop sleep does (RolloutTrafficSplit's old workers)."""
    workers = tmp_path / "workers"
    with engine(9, "--time-scale", "0", "--drain-quiet-seconds", str(QUIET_S), "--discovery-dir", str(workers)) as served:
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        await waiting.until_async(
            lambda: not list(workers.glob("*.json")), timeout_s=2.0, what="withdrawn from discovery first", interval_s=0.05
        )
        assert await exited(served.proc, QUIET_S / 3) is None, "closed before --drain-quiet-seconds of idle time passed"
        code = await exited(served.proc, QUIET_S + EXIT_WAIT_S)
        took = time.monotonic() - signalled
        text = served.output()
    assert code == 0, text
    assert took >= QUIET_S, f"closed {took:.1f} s after the signal, before {QUIET_S:g} s of idle time"
    assert f"serving until idle for {QUIET_S:g} s" in text, text


async def test_engines_of_one_process_share_the_ground_truth_file(tmp_path: Path) -> None:
    truth = tmp_path / "deep" / "er" / "shared.jsonl"
    with engine(3, "--count", "2", "--time-scale", "0", "--drain-seconds", "0", "--groundtruth-file", str(truth)) as served:
        urls = [line.split("url=", 1)[1].strip() for line in served.lines if "url=" in line]
        async with aiohttp.ClientSession() as http:
            outs = [await traffic.complete(http, url, MODEL, traffic.unique_prompt(), max_tokens=2) for url in urls]
        assert all(o.ok for o in outs), outs
        served.proc.send_signal(signal.SIGTERM)
        assert await exited(served.proc, EXIT_WAIT_S) == 0
    records = groundtruth.read_json_lines(truth)
    assert len(records) == 2 and len({r["engine_id"] for r in records}) == 2, records


def test_the_ground_truth_file_defaults_to_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = tmp_path / "from-env.jsonl"
    monkeypatch.setenv("SERVECERT_GROUNDTRUTH_FILE", str(truth))
    with engine(4, "--time-scale", "0", "--drain-seconds", "0") as served:

        async def ask() -> traffic.Outcome:
            async with aiohttp.ClientSession() as http:
                return await traffic.complete(http, served.url, MODEL, traffic.unique_prompt(), max_tokens=2)

        assert asyncio.run(ask()).ok
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=EXIT_WAIT_S) == 0
    [record] = groundtruth.read_json_lines(truth)
    assert record["outcome"] == groundtruth.OK and record["completion_tokens"] == 2


# --- in process: what counts as in flight, and the drain loop ------------------------------------


async def test_only_work_counts_as_in_flight_and_a_drain_waits_for_it(host: EngineHost) -> None:
    engine_ = await host.add(config(time_scale=1.0, timing=Constant(10.0, 40.0)), address(5))
    async with aiohttp.ClientSession() as http:
        events = await http.get(engine_.url + "/events/kv?max_seconds=5")
        try:
            assert host.in_flight() == 0, "an event-stream subscriber is not work"
            task = asyncio.create_task(traffic.complete(http, engine_.url, MODEL, traffic.unique_prompt(), max_tokens=10))
            for _ in range(100):  # bounded: until the request arrived
                if host.in_flight():
                    break
                await asyncio.sleep(0.01)
            assert host.in_flight() == 1
            start = time.monotonic()
            assert await host.drain(5.0, quiet_s=0.1) == 0
            assert task.done() and (await task).ok
            assert time.monotonic() - start >= 0.1
        finally:
            events.close()


async def test_a_drain_gives_up_at_its_limit_or_when_interrupted(host: EngineHost) -> None:
    engine_ = await host.add(config(time_scale=1.0, timing=Constant(10.0, 100.0)), address(6))
    hurry = asyncio.Event()
    async with aiohttp.ClientSession() as http:
        task = asyncio.create_task(traffic.complete(http, engine_.url, MODEL, traffic.unique_prompt(), max_tokens=30))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        assert await host.drain(0.3, quiet_s=0.1) == 1
        assert 0.25 < time.monotonic() - start < 1.0
        asyncio.get_running_loop().call_later(0.1, hurry.set)
        assert await host.drain(10.0, interrupt=hurry) == 1
        assert time.monotonic() - start < 1.5
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_draining_one_engine_waits_for_its_work_only(host: EngineHost) -> None:
    """A scale-down drains the removed engine; the others' streams must not hold it."""
    busy = await host.add(config(time_scale=1.0, timing=Constant(10.0, 100.0)), address(7))
    leaving = await host.add(config(time_scale=1.0, timing=Constant(10.0, 40.0)), address(8))
    async with aiohttp.ClientSession() as http:
        long_ = asyncio.create_task(traffic.complete(http, busy.url, MODEL, traffic.unique_prompt(), max_tokens=40))
        short = asyncio.create_task(traffic.complete(http, leaving.url, MODEL, traffic.unique_prompt(), max_tokens=8))
        await waiting.until_async(
            lambda: host.in_flight(busy) and host.in_flight(leaving), timeout_s=1.0, what="both requests in flight", interval_s=0.01
        )
        assert (host.in_flight(busy), host.in_flight(leaving)) == (1, 1)
        assert await host.drain(5.0, quiet_s=0.1, engine=leaving) == 0
        assert short.done() and (await short).ok, "the leaving engine's stream was served to its end"
        assert not long_.done(), "the drain did not wait for the other engine's ~4 s stream"
        assert (await long_).ok


async def test_a_fresh_prefilled_kv_handle_counts_as_in_flight_until_it_is_pulled() -> None:
    engine_ = Engine(config(role="prefill"))
    await engine_.start()
    try:
        seq = engine_helpers.submit(engine_, engine_helpers.request(engine_helpers.prompt(40), max_tokens=1))
        await engine_helpers.tokens_of(seq)
        assert seq.stream.handle is not None
        assert engine_.handles_pinned_within(10.0) == 1, "its decode engine's pull may still come"
        assert engine_.handles_pinned_within(0.0) == 0, "an old, never pulled handle does not hold a drain"
        engine_.release_handle(seq.stream.handle.handle_id, engine_.layout)
        assert engine_.handles_pinned_within(10.0) == 0
        # NB: release wakes the scheduler loop and stop() follows in the same turn: the case where Python 3.11's
        # wait_for could swallow the cancellation; Engine.stop() must still end the loop.
    finally:
        # NB: with the race, the first cancel is lost and stop() hangs until wait_for cancels it again (5 s);
        # without it, stop() takes milliseconds. 2.5 s separates the two on any machine.
        start = time.monotonic()
        await asyncio.wait_for(engine_.stop(), 5.0)
        assert time.monotonic() - start < 2.5, "Engine.stop() lost its cancellation to the scheduler loop's wake-up"


# --- the file format -----------------------------------------------------------------------------


def _record(engine_id: str, n: int) -> dict[str, Any]:
    return {"request_id": f"r{n}", "engine_id": engine_id, "outcome": "ok"}


def test_the_reader_skips_a_truncated_last_line_and_reads_a_folder(tmp_path: Path) -> None:
    sink = groundtruth.JsonLinesSink(tmp_path / "a.jsonl")
    sink.write(_record("a", 1))
    sink.write(_record("a", 2))
    sink.close()
    with open(tmp_path / "a.jsonl", "ab") as f:
        f.write(b'{"request_id": "r3", "engine_id": "a", "outc')  # killed mid-write
    (tmp_path / "b.jsonl").write_text('{"request_id": "r1", "engine_id": "b", "outcome": "ok"}\n')
    (tmp_path / "notes.txt").write_text("not a record\n")
    assert [r["request_id"] for r in groundtruth.read_json_lines(tmp_path / "a.jsonl")] == ["r1", "r2"]
    assert [(r["engine_id"], r["request_id"]) for r in groundtruth.read_json_lines(tmp_path)] == [("a", "r1"), ("a", "r2"), ("b", "r1")]
    assert groundtruth.read_json_lines(tmp_path / "missing") == []


def test_a_sink_reopening_a_truncated_file_starts_on_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "restarted.jsonl"
    path.write_bytes(b'{"request_id": "r1"}\n{"request_id": "r2", "eng')  # the previous container died mid-write
    sink = groundtruth.JsonLinesSink(path)
    sink.write(_record("e", 3))
    sink.close()
    assert [r["request_id"] for r in groundtruth.read_json_lines(path)] == ["r1", "r3"]


def test_a_write_error_is_reported_once_and_never_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    sink = groundtruth.JsonLinesSink(blocker / "cannot" / "be.jsonl")  # a parent that is a file
    sink.write(_record("e", 1))
    sink.write(_record("e", 2))
    err = capsys.readouterr().err
    assert err.count("ground truth: cannot write") == 1 and "keeps serving" in err
    assert sink.written == 0
