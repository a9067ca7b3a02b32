"""An engine counts how far it ran behind its timing model, per request, and never counts an injected stall."""

from __future__ import annotations

import asyncio
import time

from servecert.fakes import faults, timing
from servecert.fakes.engine import Engine
from servecert.fakes.groundtruth import RequestRecord
from servecert.fakes.host import EngineHost
from tests.conftest import config
from tests.fakes.engine_helpers import prompt, request, submit, tokens_of

BLOCK_S = 0.3  # how long the test holds the event loop: far above any iteration's priced time below
STALL_S = 1.0  # an injected stall: counted, it would put the busy request a whole second behind
PRICED = timing.Constant(prefill=20.0, decode=20.0)  # real ms at time scale 1


async def started(host: EngineHost, **overrides: object) -> Engine:
    return await host.add(config(time_scale=1.0, timing=PRICED, **overrides))


async def hold_the_loop_after_first_token(engine: Engine) -> None:
    """Wait for the first token anywhere, then keep the event loop for BLOCK_S (the CPU the host withholds)."""
    async def first_token() -> None:
        while not any(s.first_token_at is not None for s in engine.running):
            await asyncio.sleep(0.001)

    await asyncio.wait_for(first_token(), 10.0)
    time.sleep(BLOCK_S)  # NB: blocking on purpose: the engine's iteration cannot end on time


def only_record(engine: Engine) -> RequestRecord:
    records = engine.log.since(0)
    assert len(records) == 1, records
    return records[0]


async def test_a_loop_held_after_the_first_token_is_counted_after_it(host: EngineHost) -> None:
    engine = await started(host)
    seq = submit(engine, request(prompt(16), max_tokens=8))
    await asyncio.gather(tokens_of(seq), hold_the_loop_after_first_token(engine))
    record = only_record(engine)
    assert record.behind_after_first_token_s >= BLOCK_S * 0.8, record
    assert record.behind_to_first_token_s < BLOCK_S / 2, record


async def test_a_request_waiting_while_the_loop_is_held_counts_it_before_its_first_token(host: EngineHost) -> None:
    engine = await started(host, max_num_seqs=1)
    first = submit(engine, request(prompt(16), max_tokens=8))
    queued = submit(engine, request(prompt(16, 5000), max_tokens=2))
    await asyncio.gather(tokens_of(first), tokens_of(queued), hold_the_loop_after_first_token(engine))
    by_id = {r.request_id: r for r in engine.log.since(0)}
    assert by_id[queued.request_id].behind_to_first_token_s >= BLOCK_S * 0.8, by_id


async def test_an_injected_stall_is_not_lateness(host: EngineHost) -> None:
    engine = await started(host, faults=faults.Faults(stall_after=2, stall_seconds=STALL_S))
    busy = submit(engine, request(prompt(16), max_tokens=8))
    await asyncio.wait_for(busy.stream.next_tokens(), 10.0)  # the loop is busy: the stall comes between iterations
    stalling = submit(engine, request(prompt(16, 5000), max_tokens=2))
    await asyncio.gather(tokens_of(busy), tokens_of(stalling))
    for record in engine.log.since(0):
        assert record.behind_to_first_token_s + record.behind_after_first_token_s < STALL_S / 2, record
