"""Speculative decoding in the fake engine: a decode step emits the accepted draft tokens too, so steps per request
fall by the accept length (the seed 003 planner reads it as runtime metadata)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from servecert.fakes.engine import Engine, EngineConfig
from servecert.fakes.host import EngineHost
from tests.conftest import config
from tests.fakes.engine_helpers import prompt, request, submit, tokens_of

TOKENS = 120


async def decoded(host: EngineHost, accept: float) -> tuple[Engine, list[int]]:
    engine = await host.add(config(spec_accept_length=accept))
    tokens = await tokens_of(submit(engine, request(prompt(32), max_tokens=TOKENS)))
    return engine, tokens


def counted(engine: Engine) -> tuple[float, float]:
    """(drafts, accepted tokens) as the engine's Prometheus exposition states them."""
    values = {s.name: s.value for f in text_string_to_metric_families(engine.metrics.exposition().decode()) for s in f.samples}
    return values["vllm:spec_decode_num_drafts_total"], values["vllm:spec_decode_num_accepted_tokens_total"]


@pytest.mark.parametrize("accept", [2.0, 2.5, 3.0])
async def test_each_step_emits_the_accept_length_on_average(host: EngineHost, accept: float) -> None:
    engine, tokens = await decoded(host, accept)
    assert len(tokens) == TOKENS  # max_tokens still ends the request exactly
    drafts, accepted = counted(engine)
    assert 1 + accepted / drafts == pytest.approx(accept, abs=0.3)
    assert drafts == pytest.approx((TOKENS - 1) / accept, rel=0.2)  # the first token is the prefill's


async def test_without_speculation_a_step_emits_one_token_and_counts_no_draft(host: EngineHost) -> None:
    engine, tokens = await decoded(host, 1.0)
    assert len(tokens) == TOKENS
    assert counted(engine) == (0.0, 0.0)


def test_an_accept_length_outside_one_to_eight_is_refused() -> None:
    for bad in (0.5, 9.0):
        with pytest.raises(ValueError, match="spec_accept_length"):
            EngineConfig(spec_accept_length=bad)
