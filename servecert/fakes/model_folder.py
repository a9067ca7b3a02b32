"""The fake model as a folder a client can load: ``config.json``, ``tokenizer.json``, ``tokenizer_config.json``.

Benchmark clients (AIPerf, GuideLLM, ``vllm bench serve``) count tokens with the served model's
Hugging Face tokenizer. The fake engines count with ``servecert-words-v1``
(``servecert.protocol.tokenizer``), which no client can load, so AIPerf counted every completion as 8 tokens
instead of 25-32. This module writes that tokenizer in Hugging Face's format, so a client's counts
equal the engine's ``usage``:

* pre-tokenizer: split on white space, then isolate ``\\w{1,8}`` and single ``[^\\w\\s]`` — the
  same pieces as ``servecert.protocol.tokenizer.encode`` (a word run longer than 8 characters is cut into
  pieces of 8 by the regex's greed, as ``encode`` cuts it);
* model: WordLevel over the engine's decode words (every word a fake engine generates is one
  known token, so re-tokenizing a completion's text counts its tokens) plus the specials
  (``<s>``, ``</s>`` at ids 1-2, the chat role markers at their ids); any other piece is the
  unknown token ``unk`` (id 0), still one token, as ``encode`` gives it one id — and a plain word,
  so text a client decodes from token ids (AIPerf builds prompts so) counts the same again;
* chat template: each message as ``<|role|> content``, then ``<|assistant|>``, each marker one
  token (``servecert.protocol.tokenizer.render_chat``).

Token *ids* differ from the engine's for words outside the decode list (``encode`` hashes
pieces); only counts are the contract. But a client that builds its prompts by decoding the ids of
its own corpus (AIPerf, GuideLLM) finds none of its English words here, so every prompt it builds
is ``unk unk ...``, and the engine serves nearly all of it from the prefix cache.

For those clients the folder of ``servecert-bytes-v1`` (``files(tokenizer_name=BYTES_NAME)``): a
byte-level BPE with no merges (GPT-2's byte-to-character map, one token a UTF-8 byte, ids
``BYTE_BASE + byte``), the same specials, and a chat template with no white space around the
markers. Its ids equal the engine's exactly, for any text, and decoding gives the text back, so a
client's prompts share a prefix only where their text does. Engines serve it with ``--tokenizer
servecert-bytes-v1``.

No ``tokenizers`` package is needed to write either folder; ``tests/fakes/test_model_folder.py``
loads them with ``tokenizers`` and checks counts (words) and ids (bytes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servecert.protocol import tokenizer as words

UNK, BOS, EOS = "unk", "<s>", "</s>"
"""NB: the unknown token is a plain one-piece word: clients build prompts by decoding token ids (AIPerf samples its
corpus's ids), and ``<unk>`` decoded would be three pieces ("<", "unk", ">") for the engine — AIPerf's first run
saw 1652 prompt tokens in usage for 550 it had sampled. Nor is it declared as ``unk_token`` in
``tokenizer_config.json``: ``transformers`` would then count it special, and GuideLLM builds its synthetic prompts with
``decode(ids, skip_special_tokens=True)``, which gave an empty prompt (2 prompt tokens in usage for 64 asked)."""
RESERVED = "rsv{}"
"""Ids below the first decode word that no special takes: one-piece words too, so any id decodes to one engine token."""
PIECE_PATTERN = r"\w{1,8}|[^\w\s]"
"""``servecert.protocol.tokenizer``'s pieces (runs of at most ``MAX_PIECE`` word characters, single other characters)."""
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
BYTES_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""bytes-v1's: white space is a token there, so none stands beside a marker (``servecert.protocol.tokenizer.BYTES.render_chat``)."""
FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def _specials() -> dict[str, int]:
    """The tokens clients treat as special (skipped when they decode): BOS, EOS and the chat role markers."""
    return dict(words.SPECIAL_TEXT)


def vocabulary() -> dict[str, int]:
    """Specials, then each decode word at the first id the engine decodes to it; every other id below that is reserved.

    Every entry is one engine piece except the specials (``<s>``, ``</s>``, ``<|role|>``), which clients skip when they
    decode and which only the chat template writes."""
    vocab = {UNK: 0, **_specials()}  # NB: the unknown token is no special: decoded, it must be text
    for token_id in range(words.FIRST_WORD_ID, words.VOCAB_SIZE):
        word = words.decode_token(token_id).strip()
        if word in vocab:
            break  # NB: the decode words repeat with a period; past the first, every word is taken
        vocab[word] = token_id
    taken = set(vocab.values())
    vocab.update({RESERVED.format(i): i for i in range(max(taken)) if i not in taken})
    return vocab


def _added_token(content: str, token_id: int) -> dict[str, Any]:
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    return {"id": token_id, "content": content, **flags}


def _tokenizer_file(pre_tokenizer: dict[str, Any], decoder: dict[str, Any] | None, model: dict[str, Any]) -> dict[str, Any]:
    """A ``tokenizer.json`` with the specials as added tokens and no normalizer or post-processor."""
    added = [_added_token(content, token_id) for content, token_id in sorted(_specials().items(), key=lambda kv: kv[1])]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": decoder,
        "model": model,
    }


def tokenizer_json() -> dict[str, Any]:
    pieces = {"type": "Split", "pattern": {"Regex": PIECE_PATTERN}, "behavior": "Isolated", "invert": False}
    pre_tokenizer = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, pieces]}
    return _tokenizer_file(pre_tokenizer, None, {"type": "WordLevel", "vocab": vocabulary(), "unk_token": UNK})


def byte_characters() -> dict[int, str]:
    """GPT-2's map of each byte to a printable character, as Hugging Face's ``ByteLevel`` pre-tokenizer applies it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars.update({b: chr(256 + n) for n, b in enumerate(shifted)})
    return dict(sorted(chars.items()))


def bytes_tokenizer_json() -> dict[str, Any]:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    vocab = {char: words.BYTE_BASE + b for b, char in byte_characters().items()}
    vocab.update(_specials())
    model: dict[str, Any] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        "vocab": vocab,
        "merges": [],
    }
    return _tokenizer_file(byte_level, byte_level, model)


def files(context_length: int = 8192, tokenizer_name: str = words.TOKENIZER_NAME) -> dict[str, dict[str, Any]]:
    """Every file of the folder, by name, for the engines' tokenizer ``tokenizer_name``."""
    tok = words.by_name(tokenizer_name)
    vocab_size = words.VOCAB_SIZE if tok is words.WORDS else words.BYTE_BASE + 256
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": context_length,
        "bos_token_id": 1,
        "eos_token_id": words.EOS_ID,
        "torch_dtype": "float16",
        "servecert_tokenizer": tok.name,
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": context_length,
        "chat_template": CHAT_TEMPLATE if tok is words.WORDS else BYTES_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    return {
        "config.json": config,
        "tokenizer.json": tokenizer_json() if tok is words.WORDS else bytes_tokenizer_json(),
        "tokenizer_config.json": tokenizer_config,
        "special_tokens_map.json": {"bos_token": BOS, "eos_token": EOS},
        "generation_config.json": {"bos_token_id": 1, "eos_token_id": words.EOS_ID, "do_sample": False},
    }


def write(folder: Path, context_length: int = 8192, tokenizer_name: str = words.TOKENIZER_NAME) -> list[Path]:
    """Write the folder (created if missing; these files replaced); returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in files(context_length, tokenizer_name).items():
        path = folder / name
        path.write_text(json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        written.append(path)
    return written
