"""Prompt text with a known token count under ``servecert-words-v1`` (one 8-character word = one token).

``unique_prompt`` makes prompts no other request shares (no accidental prefix reuse);
``trace_prompt`` makes the prompt of a Mooncake entry, whose leading words are a pure function of
its hash ids, so entries sharing hash ids share exactly that prefix.
"""

from __future__ import annotations

import itertools

_nonce = itertools.count(1)
_MASK7 = 16**7


def block_words(hash_id: int, block_tokens: int) -> list[str]:
    return [f"h{hash_id % 16**4:04x}{i % 4096:03x}" for i in range(block_tokens)]


def unique_words(count: int, salt: int | None = None) -> list[str]:
    salt = next(_nonce) if salt is None else salt
    return [f"q{(salt * 8191 + i) % _MASK7:07x}" for i in range(count)]


def unique_prompt(tokens: int, salt: int | None = None) -> str:
    return " ".join(unique_words(tokens, salt))


def trace_prompt(hash_ids: tuple[int, ...] | list[int], input_length: int, block_tokens: int, salt: int | None = None) -> str:
    words: list[str] = []
    for h in hash_ids:
        if len(words) >= input_length:
            break
        words.extend(block_words(h, block_tokens))
    words = words[:input_length]
    if len(words) < input_length:
        words.extend(unique_words(input_length - len(words), salt))
    return " ".join(words)
