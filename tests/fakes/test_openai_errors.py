"""Client mistakes on the fake engine's OpenAI routes get OpenAI-style error bodies, never a 500.

Every case sends one bad request to a fresh in-process engine (context length 64) and checks the
status, the ``{"error": {"message", "type", "param", "code"}}`` body, that the ground-truth log
stayed empty (a request refused at validation never reached the engine), and that a good request
on the same route still succeeds afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from servecert.fakes.host import EngineHost
from servecert.protocol import connection_guard
from tests.conftest import config

CONTEXT = 64
COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
DROP = object()  # marks a field to remove from the good body

GOOD: dict[str, dict[str, Any]] = {
    COMPLETIONS: {"model": "m", "prompt": "hello there engine", "max_tokens": 4},
    CHAT: {"model": "m", "messages": [{"role": "user", "content": "hello there engine"}], "max_tokens": 4},
}
LONG_TEXT = " ".join(f"w{i}" for i in range(CONTEXT + 16))  # one token per word: over the context


@dataclass(frozen=True)
class Mistake:
    route: str
    body: bytes
    status: int | tuple[int, ...]
    param: str | None
    code: str


def _changed(route: str, **changes: object) -> bytes:
    body = {k: v for k, v in GOOD[route].items() if k not in changes}
    body.update({k: v for k, v in changes.items() if v is not DROP})
    return json.dumps(body).encode()


def _both(name: str, status: int, param: str | None, code: str, **changes: object) -> list[Any]:
    return [
        pytest.param(Mistake(route, _changed(route, **changes), status, param, code), id=f"{kind}-{name}")
        for kind, route in (("completions", COMPLETIONS), ("chat", CHAT))
    ]


def _one(route: str, name: str, body: bytes, status: int | tuple[int, ...], param: str | None, code: str) -> Any:
    kind = "completions" if route == COMPLETIONS else "chat"
    return pytest.param(Mistake(route, body, status, param, code), id=f"{kind}-{name}")


def _raw(name: str, body: bytes, status: int, code: str) -> list[Any]:
    return [_one(route, name, body, status, None, code) for route in (COMPLETIONS, CHAT)]


MISTAKES: list[Any] = [
    # the model
    *_both("missing-model", 400, "model", "missing_model", model=DROP),
    *_both("empty-model", 400, "model", "missing_model", model=""),
    *_both("unknown-model", 404, "model", "model_not_found", model="no-such-model"),
    *_both("model-as-int", 422, "model", "invalid_type", model=7),
    # max_tokens and friends
    *_both("negative-max-tokens", 400, "max_tokens", "invalid_request", max_tokens=-1),
    *_both("zero-max-tokens", 400, "max_tokens", "invalid_request", max_tokens=0),
    *_both("max-tokens-over-context", 400, "max_tokens", "context_length_exceeded", max_tokens=CONTEXT * 4),
    *_both("max-tokens-astronomical", 400, "max_tokens", "context_length_exceeded", max_tokens=10**15),
    *_both("max-tokens-as-string", 422, "max_tokens", "invalid_type", max_tokens="4"),
    *_both("max-tokens-as-float", 422, "max_tokens", "invalid_type", max_tokens=4.5),
    *_both("max-tokens-as-bool", 422, "max_tokens", "invalid_type", max_tokens=True),
    *_both("min-tokens-over-max-tokens", 400, "min_tokens", "invalid_request", min_tokens=5, max_tokens=4),
    *_both("negative-min-tokens", 400, "min_tokens", "invalid_request", min_tokens=-1),
    *_both("n-is-2", 400, "n", "invalid_request", n=2),
    *_both("ignore-eos-as-string", 422, "ignore_eos", "invalid_type", ignore_eos="yes"),
    *_both("nvext-as-list", 422, "nvext", "invalid_type", nvext=[True]),
    *_both("nvext-ignore-eos-as-int", 422, "nvext.ignore_eos", "invalid_type", nvext={"ignore_eos": 1}),
    # streaming flags
    *_both("stream-as-string", 422, "stream", "invalid_type", stream="true"),
    *_both("stream-options-as-string", 422, "stream_options", "invalid_type", stream=True, stream_options="usage"),
    *_both("streamed-with-bad-max-tokens", 400, "max_tokens", "invalid_request", stream=True, max_tokens=-3),
    # stop
    *_both("stop-empty-string", 422, "stop", "invalid_type", stop=""),
    *_both("stop-as-int", 422, "stop", "invalid_type", stop=3),
    *_both("stop-list-with-int", 422, "stop", "invalid_type", stop=["ok", 3]),
    *_both("stop-list-of-five", 422, "stop", "invalid_type", stop=["a", "b", "c", "d", "e"]),
    # other types
    *_both("seed-as-string", 422, "seed", "invalid_type", seed="42"),
    *_both("ignore-eos-as-string", 422, "ignore_eos", "invalid_type", ignore_eos="yes"),
    # sampling parameters: vLLM's ranges (vllm/sampling_params.py _verify_args); the fake's text ignores them
    *_both("temperature-nan", 400, "temperature", "invalid_request", temperature=float("nan")),
    *_both("temperature-infinite", 400, "temperature", "invalid_request", temperature=float("inf")),
    *_both("temperature-negative", 400, "temperature", "invalid_request", temperature=-1),
    *_both("temperature-over-2", 400, "temperature", "invalid_request", temperature=2.5),
    *_both("temperature-as-string", 422, "temperature", "invalid_type", temperature="hot"),
    *_both("top-p-5", 400, "top_p", "invalid_request", top_p=5),
    *_both("top-p-zero", 400, "top_p", "invalid_request", top_p=0),
    *_both("top-k-minus-2", 400, "top_k", "invalid_request", top_k=-2),
    *_both("top-k-as-float", 422, "top_k", "invalid_type", top_k=1.5),
    *_both("min-p-over-1", 400, "min_p", "invalid_request", min_p=1.5),
    *_both("presence-penalty-3", 400, "presence_penalty", "invalid_request", presence_penalty=3),
    *_both("frequency-penalty-minus-3", 400, "frequency_penalty", "invalid_request", frequency_penalty=-3),
    *_both("repetition-penalty-zero", 400, "repetition_penalty", "invalid_request", repetition_penalty=0),
    *_both("seed-over-int64", 400, "seed", "invalid_request", seed=2**63),
    *_both("stream-options-without-stream", 400, "stream_options", "invalid_request", stream_options={"include_usage": True}),
    # features the fakes do not implement: refused when asked for, never silently ignored
    *_both("top-logprobs", 400, "top_logprobs", "unsupported_parameter", top_logprobs=2),
    *_both("logprobs-over-20", 400, "logprobs", "invalid_request", logprobs=21),
    *_both("best-of-3", 400, "best_of", "invalid_request", best_of=3),
    *_both("response-format-json", 400, "response_format", "unsupported_parameter", response_format={"type": "json_object"}),
    *_both("response-format-as-string", 422, "response_format", "invalid_type", response_format="json"),
    *_both("tools", 400, "tools", "unsupported_parameter", tools=[{"type": "function", "function": {"name": "f"}}]),
    *_both("tool-choice-required", 400, "tool_choice", "unsupported_parameter", tool_choice="required"),
    *_both("logit-bias-as-list", 422, "logit_bias", "invalid_type", logit_bias=[1, 2]),
    *_both("logit-bias-word-key", 422, "logit_bias", "invalid_type", logit_bias={"hello": 1}),
    _one(COMPLETIONS, "logprobs-5", _changed(COMPLETIONS, logprobs=5), 400, "logprobs", "unsupported_parameter"),
    _one(CHAT, "logprobs-true", _changed(CHAT, logprobs=True), 400, "logprobs", "unsupported_parameter"),
    _one(COMPLETIONS, "echo", _changed(COMPLETIONS, echo=True), 400, "echo", "unsupported_parameter"),
    _one(COMPLETIONS, "suffix", _changed(COMPLETIONS, suffix="the end"), 400, "suffix", "unsupported_parameter"),
    # text JSON can carry but UTF-8 cannot: a lone surrogate
    _one(COMPLETIONS, "lone-surrogate-prompt", _changed(COMPLETIONS, prompt="hello \ud800 there"), 400, "prompt", "invalid_request"),
    _one(COMPLETIONS, "lone-surrogate-in-list", _changed(COMPLETIONS, prompt=["\udfff"]), 400, "prompt", "invalid_request"),
    _one(
        CHAT, "lone-surrogate-content", _changed(CHAT, messages=[{"role": "user", "content": "a \udc80 b"}]), 400, "messages",
        "invalid_request",
    ),
    _one(
        CHAT, "lone-surrogate-part", _changed(CHAT, messages=[{"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}]),
        400, "messages", "invalid_request",
    ),
    # the body itself
    *_raw("malformed-json", b'{"model": "m", "prompt": ', 400, "invalid_json"),
    *_raw("empty-body", b"", 400, "invalid_json"),
    *_raw("not-utf8", b'{"model": "\xff\xfe"}', 400, "invalid_json"),
    *_raw("json-array-body", json.dumps([GOOD[COMPLETIONS]]).encode(), 422, "invalid_type"),
    *_raw("json-string-body", b'"hello"', 422, "invalid_type"),
    # completions: the prompt
    _one(COMPLETIONS, "missing-prompt", _changed(COMPLETIONS, prompt=DROP), 400, "prompt", "invalid_request"),
    _one(COMPLETIONS, "empty-prompt", _changed(COMPLETIONS, prompt=""), 400, "prompt", "invalid_request"),
    _one(COMPLETIONS, "whitespace-prompt", _changed(COMPLETIONS, prompt="   \n"), 400, "prompt", "invalid_request"),
    _one(COMPLETIONS, "empty-token-list-prompt", _changed(COMPLETIONS, prompt=[]), (400, 422), "prompt", ""),
    _one(COMPLETIONS, "prompt-as-dict", _changed(COMPLETIONS, prompt={"text": "hi"}), 422, "prompt", "invalid_type"),
    _one(COMPLETIONS, "prompt-as-int", _changed(COMPLETIONS, prompt=5), 422, "prompt", "invalid_type"),
    _one(COMPLETIONS, "prompt-list-of-bools", _changed(COMPLETIONS, prompt=[True, False]), 422, "prompt", "invalid_type"),
    _one(COMPLETIONS, "prompt-over-context", _changed(COMPLETIONS, prompt=LONG_TEXT), 400, "prompt", "context_length_exceeded"),
    _one(
        COMPLETIONS, "token-prompt-over-context", _changed(COMPLETIONS, prompt=[300] * (CONTEXT + 1)), 400, "prompt",
        "context_length_exceeded",
    ),
    # chat: the messages
    _one(CHAT, "missing-messages", _changed(CHAT, messages=DROP), 400, "messages", "invalid_request"),
    _one(CHAT, "empty-messages", _changed(CHAT, messages=[]), 400, "messages", "invalid_request"),
    _one(CHAT, "messages-as-string", _changed(CHAT, messages="hello"), 422, "messages", "invalid_type"),
    _one(CHAT, "messages-as-dict", _changed(CHAT, messages={"role": "user", "content": "x"}), 422, "messages", "invalid_type"),
    _one(CHAT, "message-not-an-object", _changed(CHAT, messages=["hello"]), 422, "messages", "invalid_type"),
    _one(CHAT, "message-without-role", _changed(CHAT, messages=[{"content": "hi"}]), 422, "messages", "invalid_type"),
    _one(CHAT, "unknown-role", _changed(CHAT, messages=[{"role": "wizard", "content": "hi"}]), 400, "messages", "invalid_request"),
    _one(CHAT, "content-as-int", _changed(CHAT, messages=[{"role": "user", "content": 5}]), 422, "messages", "invalid_type"),
    _one(
        CHAT, "content-part-not-text", _changed(CHAT, messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 422,
        "messages", "invalid_type",
    ),
    _one(
        CHAT, "messages-over-context", _changed(CHAT, messages=[{"role": "user", "content": LONG_TEXT}]), 400, "messages",
        "context_length_exceeded",
    ),
]


async def _post(http: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, str, Any]:
    headers = {"Content-Type": "application/json"}
    async with http.post(url, data=body, headers=headers) as resp:
        text = await resp.text()
        return resp.status, resp.content_type, json.loads(text) if resp.content_type == "application/json" else text


async def _records(http: aiohttp.ClientSession, base: str) -> list[dict[str, Any]]:
    async with http.get(base + "/groundtruth") as resp:
        assert resp.status == 200
        return list((await resp.json())["records"])


def assert_openai_error(status: int, content_type: str, body: Any, mistake: Mistake) -> None:
    allowed = mistake.status if isinstance(mistake.status, tuple) else (mistake.status,)
    assert status in allowed, f"status {status}, body {body!r}"
    assert content_type == "application/json", body
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] == mistake.param, error
    assert isinstance(error["code"], str) and error["code"], error
    if mistake.code:
        assert error["code"] == mistake.code, error
    assert "Traceback" not in error["message"], error


@pytest.mark.parametrize("mistake", MISTAKES)
async def test_a_client_mistake_gets_an_openai_error_body(
    host: EngineHost, http: aiohttp.ClientSession, mistake: Mistake
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    status, content_type, body = await _post(http, engine.url + mistake.route, mistake.body)
    assert_openai_error(status, content_type, body, mistake)


@pytest.mark.parametrize("mistake", MISTAKES)
async def test_a_request_refused_at_validation_leaves_no_record_and_the_engine_keeps_serving(
    host: EngineHost, http: aiohttp.ClientSession, mistake: Mistake
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    await _post(http, engine.url + mistake.route, mistake.body)
    assert await _records(http, engine.url) == []
    status, _, body = await _post(http, engine.url + mistake.route, json.dumps(GOOD[mistake.route]).encode())
    assert status == 200, body
    assert body["usage"]["completion_tokens"] >= 1 or body["choices"][0]["finish_reason"] == "stop"
    records = await _records(http, engine.url)
    assert [r["outcome"] for r in records] == ["ok"]


async def test_many_mistakes_in_a_row_leave_the_log_empty_and_the_engine_healthy(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    for case in MISTAKES:
        mistake: Mistake = case.values[0]
        status, _, _ = await _post(http, engine.url + mistake.route, mistake.body)
        assert 400 <= status < 500
    assert await _records(http, engine.url) == []
    async with http.get(engine.url + "/health") as resp:
        assert resp.status == 200
    for route in (COMPLETIONS, CHAT):
        status, _, body = await _post(http, engine.url + route, json.dumps(GOOD[route]).encode())
        assert status == 200, body
    assert len(await _records(http, engine.url)) == 2


async def test_an_unknown_model_answers_like_openai_not_found(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    status, _, body = await _post(http, engine.url + COMPLETIONS, _changed(COMPLETIONS, model="gpt-17"))
    assert status == 404
    assert body["error"]["type"] == "NotFoundError"
    assert "gpt-17" in body["error"]["message"] and "`m`" in body["error"]["message"]


async def test_a_context_length_error_names_the_limit_and_the_request_size(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    status, _, body = await _post(http, engine.url + COMPLETIONS, _changed(COMPLETIONS, prompt="a b c", max_tokens=100))
    assert status == 400
    message = body["error"]["message"]
    assert str(CONTEXT) in message and "103" in message  # 3 prompt tokens + 100 asked for


async def test_a_prompt_that_exactly_fills_the_context_is_refused_but_one_token_less_is_served(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    status, _, body = await _post(http, engine.url + COMPLETIONS, _changed(COMPLETIONS, prompt=[300] * CONTEXT, max_tokens=1))
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    status, _, body = await _post(
        http, engine.url + COMPLETIONS, _changed(COMPLETIONS, prompt=[300] * (CONTEXT - 1), max_tokens=1)
    )
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == CONTEXT - 1


async def test_deeply_nested_json_is_a_client_mistake_not_a_server_error(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    depth = 10_000
    body = b'{"model": "m", "prompt": ' + b"[" * depth + b"]" * depth + b"}"
    status, content_type, answer = await _post(http, engine.url + COMPLETIONS, body)
    assert 400 <= status < 500, (status, answer)
    assert content_type == "application/json" and set(answer["error"]) == {"message", "type", "param", "code"}


async def test_an_unknown_route_or_method_gets_an_openai_error_body(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    for method, path, want in (("POST", "/v1/complete", 404), ("GET", COMPLETIONS, 405)):
        async with http.request(method, engine.url + path, json=GOOD[COMPLETIONS]) as resp:
            assert resp.status == want
            assert resp.content_type == "application/json", await resp.text()
            error = (await resp.json())["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["message"]


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        (None, 200),  # NB: as vLLM's server (FastAPI) does, a body without a Content-Type is read as JSON
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("application/vnd.example+json", 200),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),  # curl -d without -H
        ("application/octet-stream", 415),
    ],
)
async def test_a_body_that_says_it_is_not_json_is_refused_by_its_content_type(
    host: EngineHost, content_type: str | None, status: int
) -> None:
    engine = await host.add(config(context_length=CONTEXT))
    headers = {} if content_type is None else {"Content-Type": content_type}
    # NB: skip_auto_headers, or aiohttp labels a bytes body application/octet-stream itself
    body = json.dumps(GOOD[COMPLETIONS]).encode()
    async with (
        aiohttp.ClientSession(skip_auto_headers=["Content-Type"]) as http,
        http.post(engine.url + COMPLETIONS, data=body, headers=headers) as resp,
    ):
        assert resp.status == status, await resp.text()
        if status != 200:
            error = (await resp.json())["error"]
            assert error["code"] == "unsupported_media_type" and content_type in error["message"]


async def test_a_body_over_the_size_limit_is_refused_before_it_is_read(http: aiohttp.ClientSession) -> None:
    limits = connection_guard.Limits(max_body_bytes=4096)
    host = EngineHost(limits=limits)
    try:
        engine = await host.add(config(context_length=CONTEXT))
        big = json.dumps({**GOOD[COMPLETIONS], "prompt": "word " * 2000}).encode()
        status, _, body = await _post(http, engine.url + COMPLETIONS, big)
        assert status == 413 and body["error"]["code"] == "body_too_large", body
        assert "4096" in body["error"]["message"]

        async def chunks() -> Any:  # NB: no Content-Length: the limit holds while reading
            for start in range(0, len(big), 1000):
                yield big[start : start + 1000]

        async with http.post(engine.url + COMPLETIONS, data=chunks(), headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 413, await resp.text()
        assert await _records(http, engine.url) == []
        status, _, body = await _post(http, engine.url + COMPLETIONS, json.dumps(GOOD[COMPLETIONS]).encode())
        assert status == 200, body
    finally:
        await host.close()
