"""The real ``openai`` client against ``servecert engine serve`` in a subprocess.

One engine process serves the whole module (model ``m``, no simulated delays); every test makes
its prompts unique so that prefix caching by other tests cannot change what it sees.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import openai
import pytest

from tests.conftest import serve_process

BLOCK = 16


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_process("--model", "m", "--port", "0", "--time-scale", "0") as served:
        assert len(served.urls) == 1, served.lines
        yield served.urls[0]


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0, timeout=20.0) as c:
        yield c


def unique(words: int = 4) -> str:
    """A prompt of ``words`` one-token words that no other test sends (a fresh first word)."""
    return " ".join([f"u{uuid.uuid4().hex[:7]}", *(f"w{i}" for i in range(words - 1))])


def test_a_completion_comes_back_with_text_and_usage(client: openai.OpenAI) -> None:
    out = client.completions.create(model="m", prompt=unique(5), max_tokens=5)
    assert out.object == "text_completion"
    assert out.model == "m"
    assert len(out.choices) == 1
    choice = out.choices[0]
    assert choice.finish_reason in ("stop", "length")
    assert out.usage is not None
    assert out.usage.prompt_tokens == 5
    assert 0 <= out.usage.completion_tokens <= 5
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert len(choice.text.split()) == out.usage.completion_tokens
    details = out.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens == 0


def test_a_chat_completion_comes_back_as_an_assistant_message_with_usage(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(
        model="m", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": unique(3)}], max_tokens=6
    )
    assert out.object == "chat.completion"
    message = out.choices[0].message
    assert message.role == "assistant"
    assert isinstance(message.content, str)
    assert out.choices[0].finish_reason in ("stop", "length")
    assert out.usage is not None
    assert out.usage.prompt_tokens == 1 + 2 + 1 + 3 + 1  # role markers, "be brief", the user's words, <|assistant|>
    assert 0 <= out.usage.completion_tokens <= 6
    assert out.usage.prompt_tokens_details is not None
    assert out.usage.prompt_tokens_details.cached_tokens == 0


SPELLINGS = {
    "vllm": {"ignore_eos": True},  # GuideLLM's, and AIPerf's with --extra-inputs ignore_eos:true
    "nvext": {"nvext": {"ignore_eos": True}},  # Dynamo's
    "nvext-wins": {"ignore_eos": False, "nvext": {"ignore_eos": True}},  # Dynamo: nvext takes precedence
}
LENGTH = 300
"""Long enough that a spelling not honoured shows: the fake's EOS (1/64 a token) ends 99 % of answers before it."""


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_ignore_eos_gives_exactly_max_tokens_completion_tokens(client: openai.OpenAI, chat: bool, spelling: str) -> None:
    extra = SPELLINGS[spelling]
    if chat:
        out = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": unique()}], max_completion_tokens=LENGTH, extra_body=extra
        )
        text = out.choices[0].message.content or ""
    else:
        out = client.completions.create(model="m", prompt=unique(), max_tokens=LENGTH, extra_body=extra)
        text = out.choices[0].text
    assert out.usage is not None and out.usage.completion_tokens == LENGTH
    assert out.choices[0].finish_reason == "length"
    assert len(text.split()) == LENGTH


def test_a_streamed_completion_has_one_chunk_per_token(client: openai.OpenAI) -> None:
    stream = client.completions.create(model="m", prompt=unique(), max_tokens=7, stream=True, extra_body={"ignore_eos": True})
    texts: list[str] = []
    reasons: list[str] = []
    for chunk in stream:
        assert chunk.usage is None
        assert len(chunk.choices) == 1
        if chunk.choices[0].text:
            texts.append(chunk.choices[0].text)
        if chunk.choices[0].finish_reason:
            reasons.append(chunk.choices[0].finish_reason)
    assert len(texts) == 7
    assert all(len(t.split()) == 1 for t in texts)
    assert reasons == ["length"]


def test_a_streamed_chat_opens_with_the_assistant_role_and_has_one_chunk_per_token(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": unique()}], max_tokens=7, stream=True, extra_body={"ignore_eos": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(contents) == 7
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_include_usage_streams_a_final_usage_chunk(client: openai.OpenAI, chat: bool) -> None:
    options = {"include_usage": True}
    if chat:
        chunks = list(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": unique(4)}], max_tokens=5, stream=True,
                stream_options=options, extra_body={"ignore_eos": True},
            )
        )
        prompt_tokens = 1 + 4 + 1
    else:
        chunks = list(
            client.completions.create(
                model="m", prompt=unique(4), max_tokens=5, stream=True, stream_options=options, extra_body={"ignore_eos": True}
            )
        )
        prompt_tokens = 4
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens == prompt_tokens
    assert last.usage.completion_tokens == 5
    assert last.usage.total_tokens == prompt_tokens + 5
    assert last.usage.prompt_tokens_details is not None and last.usage.prompt_tokens_details.cached_tokens == 0
    assert all(c.usage is None for c in chunks[:-1])


def test_without_include_usage_a_stream_has_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(client.completions.create(model="m", prompt=unique(), max_tokens=3, stream=True))
    assert all(c.usage is None and c.choices for c in chunks)


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_the_same_seed_gives_the_same_text_and_another_seed_other_text(client: openai.OpenAI, chat: bool) -> None:
    prompt = unique()

    def text(seed: int) -> str:
        extra = {"ignore_eos": True}
        if chat:
            out = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}], max_tokens=12, seed=seed, extra_body=extra
            )
            return out.choices[0].message.content or ""
        return client.completions.create(model="m", prompt=prompt, max_tokens=12, seed=seed, extra_body=extra).choices[0].text

    first = text(1234)
    assert first
    assert text(1234) == first
    assert text(4321) != first


def test_a_repeated_long_prompt_reports_cached_tokens_the_second_time(client: openai.OpenAI) -> None:
    prompt = unique(3 * BLOCK + 5)  # three full blocks and a partial one
    first = client.completions.create(model="m", prompt=prompt, max_tokens=2)
    assert first.usage is not None and first.usage.prompt_tokens == 3 * BLOCK + 5
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    second = client.completions.create(model="m", prompt=prompt, max_tokens=2)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached > 0
    assert cached % BLOCK == 0 and cached < second.usage.prompt_tokens
    assert cached == 3 * BLOCK


def test_a_repeated_long_chat_reports_cached_tokens_the_second_time(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": unique(2 * BLOCK + 8)}]
    client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    second = client.chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 2 * BLOCK


def test_the_model_list_names_the_served_model(client: openai.OpenAI) -> None:
    models = list(client.models.list())
    assert [m.id for m in models] == ["m"]
    assert models[0].object == "model"


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_an_unknown_model_raises_not_found(client: openai.OpenAI, chat: bool) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        if chat:
            client.chat.completions.create(model="gpt-nope", messages=[{"role": "user", "content": "hi"}])
        else:
            client.completions.create(model="gpt-nope", prompt="hi")
    assert caught.value.status_code == 404
    assert isinstance(caught.value.body, dict)
    assert caught.value.body.get("code") == "model_not_found"
    assert caught.value.body.get("param") == "model"


def test_a_bad_request_raises_bad_request_with_the_param(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="m", prompt="hi", max_tokens=0)
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict) and caught.value.body.get("param") == "max_tokens"


def test_a_wrong_type_raises_unprocessable_entity(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.completions.create(model="m", prompt="hi", extra_body={"max_tokens": "seven"})
    assert caught.value.status_code == 422
