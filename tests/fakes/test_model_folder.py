"""The fake model's folder: Hugging Face's ``tokenizers`` loads it and counts exactly as ``servecert-words-v1``.

A benchmark client counts a prompt's tokens by tokenizing the prompt and a completion's by
tokenizing its text; both must equal what the fake engine reports in ``usage``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from servecert.fakes import model_folder
from servecert.harness.traffic import unique_prompt
from servecert.load import prompts as load_prompts
from servecert.protocol import tokenizer as words

tokenizers = pytest.importorskip("tokenizers", reason="pip install tokenizers (in servecert's dev extra)")

TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "supercalifragilisticexpialidocious is 34 characters",  # NB: runs over 8 characters are cut into pieces of 8
    "a,b;c:d!e?  f\t\tg\nh (parenthesised) [bracketed] {braced} <angled> 'quoted' \"double\"",
    "under_score snake_case_identifier_that_is_long 0123456789abcdef",
    "   leading and trailing white space   ",
    "ünïcödé wörds and 漢字 mixed with ascii",
    "",
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> tokenizers.Tokenizer:
    folder = tmp_path_factory.mktemp("model")
    written = model_folder.write(folder)
    assert sorted(p.name for p in written) == sorted(model_folder.FILES)
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def count(tok: tokenizers.Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("text", TEXTS)
def test_a_texts_token_count_is_the_engines(tok: tokenizers.Tokenizer, text: str) -> None:
    assert count(tok, text) == len(words.encode(text)), tok.encode(text).tokens


def test_the_suites_prompts_count_alike(tok: tokenizers.Tokenizer) -> None:
    prompts = [unique_prompt(words=n) for n in (1, 8, 48, 300)]
    prompts += [load_prompts.unique_prompt(400, salt=7), load_prompts.trace_prompt([1, 2, 3], 200, 64, salt=7)]
    for prompt in prompts:
        assert count(tok, prompt) == len(words.encode(prompt)), prompt[:80]


def test_a_completions_text_counts_one_token_per_generated_token(tok: tokenizers.Tokenizer) -> None:
    """What an engine streams is ``decode_token`` per sampled id; re-tokenized, each is one known word, no ``<unk>``."""
    rng = random.Random(3)
    ids = [rng.randrange(words.FIRST_WORD_ID, words.VOCAB_SIZE) for _ in range(2000)]
    encoded = tok.encode(words.decode(ids), add_special_tokens=False)
    assert len(encoded.ids) == len(ids)
    assert model_folder.UNK not in encoded.tokens


@pytest.mark.parametrize("text", [*TEXTS, words.decode(range(300, 700)), "Shall I compare thee to a summer's day?"])
def test_text_decoded_from_token_ids_counts_as_many_engine_tokens_as_ids(tok: tokenizers.Tokenizer, text: str) -> None:
    """A client that builds a prompt by decoding ids (AIPerf samples its corpus's ids) sends text the engine counts alike.

    Unknown words decode to the unknown token's own text, which must itself be one engine piece.
    """
    ids = tok.encode(text, add_special_tokens=False).ids
    assert len(words.encode(tok.decode(ids))) == len(ids)


@pytest.mark.parametrize("name", ["tokenizer_config.json", "special_tokens_map.json"])
def test_the_unknown_token_is_no_special_token_a_client_would_skip(name: str) -> None:
    """Declared ``unk_token``, ``transformers`` skips it in ``decode(ids, skip_special_tokens=True)``: GuideLLM 0.8.1 builds
    its synthetic prompts so, and sent empty ones (2 prompt tokens in usage for 64 asked)."""
    declared = model_folder.files()[name]
    assert "unk_token" not in declared, declared
    assert model_folder.tokenizer_json()["model"]["unk_token"] == model_folder.UNK
    assert model_folder.UNK not in {t["content"] for t in model_folder.tokenizer_json()["added_tokens"]}


def test_every_id_but_the_specials_decodes_to_one_engine_token(tok: tokenizers.Tokenizer) -> None:
    specials = {t["id"] for t in model_folder.tokenizer_json()["added_tokens"]}
    ids = [i for i in range(tok.get_vocab_size()) if i not in specials]
    assert len(ids) == tok.get_vocab_size() - len(specials) > 4096
    assert len(words.encode(tok.decode(ids))) == len(ids)


def test_the_chat_template_gives_the_engines_chat_prompt_length(tmp_path: Path) -> None:
    """Rendered by the template, a chat is one marker per message plus the assistant's, as ``render_chat`` counts it."""
    jinja2 = pytest.importorskip("jinja2")
    model_folder.write(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    messages = [("system", "You are terse."), ("user", "hello, world: what is 2+2?"), ("assistant", "four"), ("user", "thanks")]
    chat = [{"role": r, "content": c} for r, c in messages]
    text = jinja2.Template(config["chat_template"]).render(messages=chat, add_generation_prompt=True)
    assert count(tok, text) == len(words.render_chat(messages)), text


def test_the_folder_says_what_it_is(tmp_path: Path) -> None:
    model_folder.write(tmp_path, context_length=4096)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["max_position_embeddings"] == 4096 and config["eos_token_id"] == words.EOS_ID
    assert config["servecert_tokenizer"] == words.TOKENIZER_NAME
