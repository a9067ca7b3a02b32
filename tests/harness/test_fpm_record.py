"""The engines' forward passes as the suite records them: a real engine's stream, and the decode cadence read from it."""

from __future__ import annotations

import aiohttp

from servecert.adapters.contract import WorkerRef
from servecert.fakes.host import EngineHost
from servecert.harness.planner.fpm_record import FpmRecord, Pass
from servecert.protocol import waiting
from tests.conftest import config

COMPLETION = {"model": "m", "prompt": " ".join(f"w{i}" for i in range(40)), "max_tokens": 6, "ignore_eos": True}


async def test_a_followed_engine_s_decoding_passes_are_recorded_until_the_record_closes(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    engine = await host.add(config(time_scale=100.0))
    record = FpmRecord(http)
    record.follow([WorkerRef("w", engine.engine_id, engine.url, "agg", {})])
    async for _ in waiting.holding_async(2.0, 0.02):  # bounded, best-effort wait for the subscription to attach
        if engine.fpm_listeners:
            break
    async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
        assert resp.status == 200
    async for _ in waiting.holding_async(2.0, 0.02):
        if sum(p.decode_requests for p in record.passes) >= 5:
            break
    await record.close()
    assert record.followed == [engine.engine_id] and record.engines() == {engine.engine_id}
    decoding = [p for p in record.passes if p.decode_requests]
    assert len(decoding) == 5  # 6 tokens: the first comes with the prefill, each other one from a decode step
    assert all(p.wall_time_s > 0 for p in decoding)
    assert record.decode_cadence_s(engine.engine_id, 0.0, 1e9) is not None


async def test_an_engine_without_the_stream_has_no_passes(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    record = FpmRecord(http)
    record.follow([WorkerRef("w", "elsewhere", engine.url + "/no-such-prefix", "agg", {})])
    async for _ in waiting.holding_async(0.3, 0.02):
        pass
    await record.close()
    assert record.followed == ["elsewhere"] and record.engines() == set()
    assert record.decode_cadence_s("elsewhere", 0.0, 1e9) is None


def test_the_cadence_is_the_mean_time_between_back_to_back_decoding_passes_in_the_window() -> None:
    record = FpmRecord(session=None)  # type: ignore[arg-type]
    record.passes = [
        Pass(1.00, "a", 2, 0.08),
        Pass(1.10, "a", 2, 0.08),
        Pass(1.30, "a", 3, 0.09),  # 0.2 after the last: the engine spent 0.1 beyond wall_time
        Pass(1.40, "a", 0, 0.05),  # a pass that only prefilled: it ends the chain
        Pass(2.40, "a", 1, 0.05),  # after an idle second: not a decode step's time
        Pass(1.20, "b", 4, 0.10),
        Pass(1.35, "b", 4, 0.10),
    ]
    assert record.decode_cadence_s("a", 0.0, 2.0) == (0.10 + 0.20) / 2
    assert abs((record.decode_cadence_s("a", 1.05, 2.0) or 0.0) - 0.20) < 1e-9  # only the window's own passes
    assert abs((record.decode_cadence_s("b", 0.0, 2.0) or 0.0) - 0.15) < 1e-9
    assert record.decode_cadence_s("a", 1.35, 3.0) is None  # a prefill-only pass, then one after an idle second
    assert record.decode_cadence_s("c", 0.0, 2.0) is None
