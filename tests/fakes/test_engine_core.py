"""The engine core: continuous batching, chunked prefill, prefix caching, eviction, preemption."""

from __future__ import annotations

import asyncio
import time

import pytest

from servecert.fakes import timing
from servecert.fakes.engine import Engine, EngineError
from servecert.fakes.host import EngineHost
from servecert.protocol import streams, tokenizer
from tests.conftest import config
from tests.fakes.engine_helpers import prompt, request, submit, tokens_of


async def started(host: EngineHost, **overrides: object) -> Engine:
    return await host.add(config(**overrides))


async def test_the_running_batch_never_exceeds_max_num_seqs(host: EngineHost) -> None:
    engine = await started(host, max_num_seqs=4)
    seen: list[streams.ForwardPassMetrics] = []
    engine.fpm_listeners.append(seen.append)
    seqs = [submit(engine, request(prompt(20, 1000 + 100 * i), max_tokens=6)) for i in range(12)]
    outs = await asyncio.gather(*(tokens_of(s) for s in seqs))
    assert [len(o) for o in outs] == [6] * 12
    busy = [f for f in seen if f.scheduled_requests.num_prefill_requests + f.scheduled_requests.num_decode_requests]
    assert busy, "no forward pass was published"
    assert max(f.scheduled_requests.num_prefill_requests + f.scheduled_requests.num_decode_requests for f in busy) == 4
    assert any(f.queued_requests.num_prefill_requests > 0 for f in busy)


async def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget(host: EngineHost) -> None:
    engine = await started(host, max_num_batched_tokens=64)
    seen: list[streams.ForwardPassMetrics] = []
    engine.fpm_listeners.append(seen.append)
    await tokens_of(submit(engine, request(prompt(200), max_tokens=2)))
    chunks = [f.scheduled_requests.sum_prefill_tokens for f in seen if f.scheduled_requests.num_prefill_requests]
    assert chunks == [64, 64, 64, 8]


async def test_without_chunked_prefill_a_prompt_over_the_budget_is_refused(host: EngineHost) -> None:
    engine = await started(host, max_num_batched_tokens=64, enable_chunked_prefill=False)
    with pytest.raises(EngineError, match="chunked prefill is off"):
        submit(engine, request(prompt(100)))


async def test_a_repeated_prompt_hits_the_prefix_cache(host: EngineHost) -> None:
    engine = await started(host)
    first = submit(engine, request(prompt(64)))
    await tokens_of(first)
    second = submit(engine, request(prompt(64)))
    await tokens_of(second)
    assert first.record.cached_tokens == 0
    assert second.record.cached_tokens == 48  # 3 full blocks; the last token is always computed
    assert (engine.pool.queries, engine.pool.hits) == (128, 48)


async def test_old_prefixes_are_evicted_when_the_pool_fills(host: EngineHost) -> None:
    engine = await started(host, num_gpu_blocks=8)
    kinds: list[str] = []
    engine.kv_listeners.append(lambda e: kinds.append(e.kind))
    for i in range(4):
        await tokens_of(submit(engine, request(prompt(48, 5000 + 1000 * i), max_tokens=2)))
    assert streams.BLOCK_REMOVED in kinds
    again = submit(engine, request(prompt(48, 5000), max_tokens=2))
    await tokens_of(again)
    assert again.record.cached_tokens == 0  # the first prompt's blocks were evicted


async def test_a_full_pool_preempts_and_every_request_still_gets_all_its_tokens(host: EngineHost) -> None:
    engine = await started(host, num_gpu_blocks=10)
    seqs = [submit(engine, request(prompt(30, 7000 + 100 * i), max_tokens=40)) for i in range(4)]
    outs = await asyncio.gather(*(tokens_of(s) for s in seqs))
    assert [len(o) for o in outs] == [40] * 4
    assert sum(s.record.preemptions for s in seqs) > 0
    assert engine.pool.active_blocks == 0
    assert 'vllm:num_preemptions_total{model_name="m"}' in engine.metrics.exposition().decode()


async def test_a_request_larger_than_the_whole_pool_is_refused(host: EngineHost) -> None:
    engine = await started(host, num_gpu_blocks=4)
    with pytest.raises(EngineError, match="KV cache") as err:
        submit(engine, request(prompt(60), max_tokens=10))
    assert err.value.code == "kv_capacity_exceeded"


async def test_the_same_seed_gives_the_same_tokens(host: EngineHost) -> None:
    engine = await started(host)
    a = await tokens_of(submit(engine, request(prompt(10), max_tokens=8, seed=7)))
    b = await tokens_of(submit(engine, request(prompt(10), max_tokens=8, seed=7)))
    c = await tokens_of(submit(engine, request(prompt(10), max_tokens=8, seed=8)))
    assert a == b
    assert a != c


async def test_eos_ends_a_generation_but_not_before_min_tokens(host: EngineHost) -> None:
    engine = await started(host, eos_rate=1.0)
    seq = submit(engine, request(prompt(10), max_tokens=8, ignore_eos=False, min_tokens=3))
    assert len(await tokens_of(seq)) == 3
    assert seq.stream.finish_reason == "stop"
    forced = submit(engine, request(prompt(10), max_tokens=8, ignore_eos=True))
    assert len(await tokens_of(forced)) == 8
    assert forced.stream.finish_reason == "length"
    unforced = submit(engine, request(prompt(11), max_tokens=8, ignore_eos=False, min_tokens=0))
    assert len(await tokens_of(unforced)) == 1, "an answer is never empty: EOS is never the first token"
    assert unforced.stream.finish_reason == "stop"


async def test_a_stop_string_ends_the_generation_before_it(host: EngineHost) -> None:
    engine = await started(host)
    free = await tokens_of(submit(engine, request(prompt(10), max_tokens=6, seed=3)))
    word = tokenizer.decode_token(free[2]).strip()
    seq = submit(engine, request(prompt(10), max_tokens=6, seed=3, stop=(word,)))
    out = await tokens_of(seq)
    assert out == free[: len(out)]
    assert len(out) <= 2
    assert seq.stream.finish_reason == "stop"


async def test_simulated_time_is_divided_by_the_time_scale(host: EngineHost) -> None:
    engine = await started(host, time_scale=10.0, timing=timing.Constant(prefill=100.0, decode=50.0))
    start = time.monotonic()
    await tokens_of(submit(engine, request(prompt(10), max_tokens=3)))
    # prefill 100 ms + 2 decode steps of 50 ms = 200 simulated ms = at least 20 real ms
    assert time.monotonic() - start >= 0.02


async def test_every_finished_request_leaves_one_ground_truth_record(host: EngineHost) -> None:
    engine = await started(host)
    seqs = [submit(engine, request(prompt(20, 100 * i), max_tokens=3)) for i in range(5)]
    await asyncio.gather(*(tokens_of(s) for s in seqs))
    records = engine.log.since(0)
    assert sorted(r.request_id for r in records) == sorted(s.request_id for s in seqs)
    assert {(r.outcome, r.completion_tokens, r.finish_reason) for r in records} == {("ok", 3, "length")}
    assert all(r.first_token_at is not None and r.finished_at is not None for r in records)
