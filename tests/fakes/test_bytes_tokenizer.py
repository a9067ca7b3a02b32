"""``servecert-bytes-v1``: the folder's ``tokenizer.json`` gives the engine's ids exactly, for any text.

Real benchmark clients build prompts by decoding ids of their own corpus with the served model's
tokenizer. Under bytes-v1 that text comes back as itself, so distinct corpus text gives distinct
prompts, and an engine serving bytes-v1 caches only the prefix two prompts' texts share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecert.fakes import model_folder
from servecert.protocol import tokenizer as tok_mod
from tests.conftest import serve_process

tokenizers = pytest.importorskip("tokenizers", reason="pip install tokenizers (in servecert's dev extra)")

BLOCK = 16
SHAKESPEARE = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bytes-model")
    model_folder.write(path, tokenizer_name=tok_mod.BYTES_NAME)
    return path


@pytest.fixture(scope="module")
def hf(folder: Path) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


# NB: any text UTF-8 can carry, specials' text included (a tokenizer reads "<|user|>" as one token anywhere)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=200) | st.sampled_from(
    ["<|user|>hi", "a</s>b<s>", "<|usr|> <| user|>", "\r\n\t  ", "漢字 ünïcödé 🙂"]
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(text=TEXT)
def test_the_folders_ids_are_the_engines_for_any_text(hf: tokenizers.Tokenizer, text: str) -> None:
    assert hf.encode(text, add_special_tokens=False).ids == tok_mod.encode_bytes(text)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(text=TEXT)
def test_decoding_the_ids_gives_the_text_back_less_its_specials(hf: tokenizers.Tokenizer, text: str) -> None:
    ids = tok_mod.encode_bytes(text)
    assert hf.decode(ids, skip_special_tokens=True) == tok_mod.decode_bytes(ids)
    plain = tok_mod.decode_bytes(ids)
    assert tok_mod.encode_bytes(plain) == [t for t in ids if t >= tok_mod.BYTE_BASE]


def test_what_an_engine_generates_counts_one_token_a_token(hf: tokenizers.Tokenizer) -> None:
    import random

    rng = random.Random(5)
    ids = [tok_mod.BYTES.generate(rng) for _ in range(2000)]
    text = "".join(tok_mod.BYTES.decode_token(t) for t in ids)
    assert text == tok_mod.BYTES.decode(ids) and hf.encode(text).ids == ids


def test_the_chat_template_renders_the_engines_chat_prompt(folder: Path, hf: tokenizers.Tokenizer) -> None:
    jinja2 = pytest.importorskip("jinja2")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    messages = [("system", "You are terse."), ("user", "hello, world: what is 2+2?"), ("assistant", "four"), ("user", " thanks ")]
    chat = [{"role": r, "content": c} for r, c in messages]
    text = jinja2.Template(config["chat_template"]).render(messages=chat, add_generation_prompt=True)
    assert hf.encode(text, add_special_tokens=False).ids == tok_mod.BYTES.render_chat(messages), text


def test_the_folder_names_its_tokenizer(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    assert config["servecert_tokenizer"] == tok_mod.BYTES_NAME


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    args = ["--model", "m", "--port", "0", "--time-scale", "0", "--tokenizer", tok_mod.BYTES_NAME, "--block-size", str(BLOCK)]
    with serve_process(*args) as served, openai.OpenAI(base_url=served.urls[0] + "/v1", api_key="x", max_retries=0) as c:
        yield c


def test_an_engine_counts_a_prompt_in_bytes(client: openai.OpenAI) -> None:
    text = "ünïcödé prompt"
    out = client.completions.create(model="m", prompt=text, max_tokens=3, extra_body={"ignore_eos": True})
    assert out.usage is not None and out.usage.prompt_tokens == len(text.encode())
    assert len(out.choices[0].text) == out.usage.completion_tokens == 3


def test_an_engine_caches_only_the_prefix_two_texts_share(client: openai.OpenAI) -> None:
    """Under words-v1's folder a client's corpus text was ``unk unk ...`` and shared every block; here it shares its text's."""
    shared = "x" * (3 * BLOCK + 5)  # NB: unique to this test: three whole blocks, then five bytes
    first = client.completions.create(model="m", prompt=shared + SHAKESPEARE, max_tokens=1)
    second = client.completions.create(model="m", prompt=shared + SHAKESPEARE[::-1], max_tokens=1)
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details is not None and second.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details.cached_tokens == 3 * BLOCK


def test_a_chat_answer_is_the_engines_bytes(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": SHAKESPEARE}], max_completion_tokens=32, extra_body={"ignore_eos": True}
    )
    assert out.usage is not None and out.usage.prompt_tokens == len(SHAKESPEARE.encode()) + 2  # the user and assistant markers
    assert out.usage.completion_tokens == 32 and len(out.choices[0].message.content or "") == 32
