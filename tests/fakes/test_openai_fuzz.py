"""Fuzzing the OpenAI surface of a fake engine and of the reference frontend with Hypothesis.

Bodies are drawn field by field from the OpenAI and vLLM request schemas: each known field is
either absent, a value of its own type near the edges of its range, or any JSON value at all
(text with lone surrogates, NaN and infinities, integers past 64 bits, nested lists and objects);
unknown fields and raw bytes that are not JSON are drawn too. Every answer must come within a
bound, be a 200 of the right shape or a 4xx in OpenAI's error shape (never a 5xx), and nothing
may be logged with a traceback. The example count and seed are fixed (``derandomize``), so
``make test`` is the same run every time; set ``SERVECERT_FUZZ_EXAMPLES`` to run more.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceDeployment, ReferenceImplementation
from servecert.harness.process_env import ProcessEnvironment
from servecert.protocol import tokenizer
from tests.fakes.test_connection_guard import no_tracebacks_must_be_logged

CONTEXT = 96
EXAMPLES = int(os.environ.get("SERVECERT_FUZZ_EXAMPLES", "250"))
ANSWER_BOUND_S = 20.0  # NB: the suite's bound on one fuzzed request; each takes milliseconds (time scale 0)
ROUTES = ("/v1/completions", "/v1/chat/completions")
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

_any_char = st.characters(codec=None, exclude_categories=())  # NB: lone surrogates included
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(_any_char, max_size=24),
)
ANY_JSON = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10
)


def near(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a value of the field's own kind, sometimes anything JSON can carry."""
    return st.one_of(valid, valid, ANY_JSON)


def _number(low: float, high: float) -> st.SearchStrategy[Any]:
    return st.one_of(st.floats(low, high), st.integers(math.floor(low), math.ceil(high)))


_text = st.one_of(
    st.text(st.sampled_from("abc xyz. hello world!"), max_size=200),
    st.text(_any_char, max_size=60),
    st.text(st.characters(categories=["Cs", "Zs", "Ll"]), max_size=20),  # NB: lone surrogates often
)
COMMON: dict[str, st.SearchStrategy[Any]] = {
    "model": near(st.sampled_from(["m", "", "other", "M"])),  # NB: overrides the required one when drawn
    "max_tokens": near(st.integers(-2, CONTEXT + 4)),
    "max_completion_tokens": near(st.integers(-2, CONTEXT + 4)),
    "min_tokens": near(st.integers(-2, 12)),
    "n": near(st.integers(0, 3)),
    "best_of": near(st.integers(0, 3)),
    "stream": near(st.booleans()),
    "stream_options": near(st.fixed_dictionaries({}, optional={"include_usage": near(st.booleans())})),
    "stop": near(st.text(max_size=4) | st.lists(st.text(max_size=4), max_size=6)),
    "ignore_eos": near(st.booleans()),
    "seed": near(st.integers(-(2**64), 2**64)),
    "temperature": near(_number(-1, 3)),
    "top_p": near(_number(-0.5, 1.5)),
    "top_k": near(st.integers(-3, 60)),
    "min_p": near(_number(-0.5, 1.5)),
    "presence_penalty": near(_number(-3, 3)),
    "frequency_penalty": near(_number(-3, 3)),
    "repetition_penalty": near(_number(-1, 3)),
    "logprobs": near(st.booleans() | st.integers(-2, 25)),
    "top_logprobs": near(st.integers(-2, 25)),
    "logit_bias": near(st.dictionaries(st.integers(-5, 40000).map(str), _number(-100, 100), max_size=3)),
    "response_format": near(st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema"])})),
    "tools": near(st.lists(st.just({"type": "function", "function": {"name": "f"}}), max_size=2)),
    "tool_choice": near(st.sampled_from(["none", "auto", "required"])),
    "user": near(st.text(max_size=6)),
    "unknown_extension": ANY_JSON,
}
_prompt = st.one_of(_text, st.lists(st.integers(-5, tokenizer.VOCAB_SIZE + 5), max_size=CONTEXT + 8), st.lists(_text, max_size=2))
_part = st.fixed_dictionaries({"type": near(st.just("text")), "text": near(_text)})
_message = st.fixed_dictionaries(
    {"role": near(st.sampled_from([*tokenizer.ROLE_IDS, "wizard"])), "content": near(_text | st.lists(_part, max_size=3))}
)


def _body(required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """The required fields (mostly valid) and up to four optional ones: a body with one odd field reaches deep."""
    chosen = st.lists(st.sampled_from(sorted(optional)), max_size=4, unique=True)
    return chosen.flatmap(lambda names: st.fixed_dictionaries({**required, **{n: optional[n] for n in names}}))


MODEL = st.one_of(st.just("m"), st.just("m"), st.just("m"), ANY_JSON)
COMPLETION = _body({"model": MODEL, "prompt": near(_prompt)}, {**COMMON, "echo": near(st.booleans()), "suffix": near(st.text(max_size=4))})
CHAT = _body({"model": MODEL, "messages": near(st.lists(_message, min_size=1, max_size=4))}, COMMON)


def _encoded(body: Any) -> bytes:
    return json.dumps(body).encode()  # NB: NaN and Infinity as Python (and vLLM's server) read them


BODIES = st.one_of(
    st.tuples(st.just(ROUTES[0]), COMPLETION.map(_encoded)),
    st.tuples(st.just(ROUTES[1]), CHAT.map(_encoded)),
    st.tuples(st.sampled_from(ROUTES), st.binary(max_size=64) | ANY_JSON.map(_encoded)),
)


@pytest.fixture
async def deployment() -> AsyncIterator[ReferenceDeployment]:
    env = ProcessEnvironment()
    spec = DeploymentSpec(model="m", router=RouterSpec(), workers=(WorkerSpec("agg", context_length=CONTEXT),))
    dep = await ReferenceImplementation().deploy(spec, env)
    try:
        yield dep
    finally:
        await dep.close()
        await env.close()


def answer_must_be_openai_shaped(status: int, content_type: str, raw: bytes, stream: bool) -> None:
    assert status < 500, (status, raw[:500])
    assert content_type in ("application/json", "text/event-stream"), (status, content_type, raw[:300])
    if status >= 400:
        error = json.loads(raw)["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], error
        assert "Traceback" not in error["message"], error
        return
    assert status == 200, (status, raw[:300])
    if content_type == "text/event-stream":
        assert stream and raw.endswith(b"data: [DONE]\n\n"), raw[-300:]
        return
    assert json.loads(raw)["choices"], raw[:300]


async def _fuzz_once(http: aiohttp.ClientSession, base: str, route: str, body: bytes) -> None:
    timeout = aiohttp.ClientTimeout(total=ANSWER_BOUND_S)
    async with http.post(base + route, data=body, headers={"Content-Type": "application/json"}, timeout=timeout) as resp:
        raw = await resp.read()
        try:
            stream = json.loads(body).get("stream") is True
        except (ValueError, AttributeError):
            stream = False
        answer_must_be_openai_shaped(resp.status, resp.content_type, raw, stream)


@pytest.mark.parametrize("target", ["engine", "frontend"])
@FUZZ_SETTINGS
@given(case=BODIES)
async def test_no_request_body_gets_a_server_error_or_a_traceback(
    deployment: ReferenceDeployment, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture, target: str, case: tuple[str, bytes]
) -> None:
    base = deployment.workers[0].url if target == "engine" else deployment.frontend_url
    route, body = case
    await _fuzz_once(http, base, route, body)
    no_tracebacks_must_be_logged(caplog)
