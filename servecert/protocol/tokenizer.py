"""The suite's own deterministic tokenizer, ``servecert-words-v1``, and its chat template.

No tokenizer can be downloaded here, and both the fake engines and any frontend that
preprocesses requests must count and hash tokens identically, so the tokenizer is part of the
contract. The rules:

- Text is split into pieces: runs of word characters (split further into pieces of at most 8
  characters) and single non-space, non-word characters. White space separates pieces and is
  not itself a token.
- A piece's id is ``FIRST_WORD_ID + crc32(piece) % (VOCAB_SIZE - FIRST_WORD_ID)``: stable across
  processes, machines and runs (no Python hash randomisation).
- Ids below ``FIRST_WORD_ID`` are special (``EOS_ID`` ends a generation).
- ``decode`` maps every id to a syllable word from a fixed generated list, so generated text is
  deterministic; it is not the inverse of ``encode`` for arbitrary input text.
- Chat messages are rendered as ``<|role|> content`` segments followed by ``<|assistant|>``;
  each marker is one token.

Block hashes are chained (each block's hash covers its parent's hash and its own tokens), so two
prompts share a block hash exactly when they share every token up to the end of that block.

A second tokenizer, ``servecert-bytes-v1``, is for real benchmark clients (AIPerf, GuideLLM), which
build their prompts by decoding token ids with the served model's Hugging Face tokenizer: no
finite word list covers their text, so under ``servecert-words-v1``'s folder every English word
was its unknown token and every prompt the same ``unk unk ...``. Under bytes-v1 each UTF-8 byte is
one token (``BYTE_BASE + byte``), as a byte-level BPE with no merges: any text has distinct ids,
the folder's ``tokenizer.json`` (``servecert.fakes.model_folder``) encodes exactly so, and decoding
gives the text back, so two prompts share a prefix only where their text does. The fake generates
ASCII letters and spaces; the chat template is the same markers with no white space around them.
An engine names its tokenizer in its model card (``servecert engine serve --tokenizer``); the
suite's own tests use words-v1. ``by_name`` gives either as a ``Tokenizer``.
"""

from __future__ import annotations

import hashlib
import random
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

TOKENIZER_NAME = "servecert-words-v1"
VOCAB_SIZE = 32000
FIRST_WORD_ID = 256
EOS_ID = 2
ROLE_IDS = {"system": 10, "user": 11, "assistant": 12, "tool": 13, "developer": 14}
MAX_PIECE = 8

_PIECES = re.compile(r"\w+|[^\w\s]")
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fu", "gi", "ha", "ju", "be")


_piece_ids: dict[str, int] = {}  # NB: a bounded memo of piece -> id; prompts repeat words a lot
_MEMO_LIMIT = 200_000


def _piece_id(piece: str) -> int:
    found = _piece_ids.get(piece)
    if found is None:
        found = FIRST_WORD_ID + zlib.crc32(piece.encode()) % (VOCAB_SIZE - FIRST_WORD_ID)
        if len(_piece_ids) < _MEMO_LIMIT:
            _piece_ids[piece] = found
    return found


def encode(text: str) -> list[int]:
    ids: list[int] = []
    for piece in _PIECES.findall(text):
        if len(piece) <= MAX_PIECE:
            ids.append(_piece_id(piece))
        else:
            ids.extend(_piece_id(piece[start : start + MAX_PIECE]) for start in range(0, len(piece), MAX_PIECE))
    return ids


@lru_cache(maxsize=1)
def _words() -> tuple[str, ...]:
    n = len(_SYLLABLES)
    words = []
    for i in range(VOCAB_SIZE):
        a, b, c = i % n, (i // n) % n, (i // (n * n)) % n
        words.append(_SYLLABLES[a] + _SYLLABLES[b] + _SYLLABLES[c])
    return tuple(words)


def decode_token(token_id: int) -> str:
    """The text of one generated token: a leading space and a syllable word."""
    if token_id < FIRST_WORD_ID:
        return ""
    return " " + _words()[token_id % VOCAB_SIZE]


def decode(token_ids: Iterable[int]) -> str:
    return "".join(decode_token(t) for t in token_ids)


def _rendered(encode_text: Callable[[str], list[int]], messages: Sequence[tuple[str, str]]) -> list[int]:
    ids: list[int] = []
    for role, content in messages:
        ids.append(ROLE_IDS.get(role, ROLE_IDS["user"]))
        ids.extend(encode_text(content))
    ids.append(ROLE_IDS["assistant"])
    return ids


def render_chat(messages: Sequence[tuple[str, str]]) -> list[int]:
    """Token ids of a chat prompt: each (role, content) as a role marker then its content."""
    return _rendered(encode, messages)


def fingerprint(token_ids: Sequence[int]) -> str:
    """A short stable digest of a token sequence: joins a test's prompt to engine records."""
    data = b"".join(int(t).to_bytes(4, "little", signed=False) for t in token_ids)
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids`` (a partial last block has none)."""
    hashes: list[int] = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, *token_ids[start : start + block_size]))
        hashes.append(parent)
    return hashes


BYTES_NAME = "servecert-bytes-v1"
BYTE_BASE = FIRST_WORD_ID
"""The id of byte 0 under bytes-v1: the specials (EOS, the role markers) keep their words-v1 ids below it."""
GENERATED_BYTES = b"abcdefghijklmnopqrstuvwxyz "
"""What a fake engine generates under bytes-v1: one ASCII byte a token, so every token decodes alone."""


BOS_ID = 1
SPECIAL_TEXT = {"<s>": BOS_ID, "</s>": EOS_ID, **{f"<|{role}|>": token_id for role, token_id in ROLE_IDS.items()}}
"""The specials as text: a Hugging Face tokenizer reads them in any text as one token each (the model folder's ``added_tokens``)."""
_SPECIALS = re.compile("|".join(re.escape(text) for text in SPECIAL_TEXT))


def encode_bytes(text: str) -> list[int]:
    """One id a UTF-8 byte; a special's text (``<|user|>``) is its one id, as Hugging Face's added tokens are."""
    ids: list[int] = []
    start = 0
    for match in _SPECIALS.finditer(text):
        ids.extend(BYTE_BASE + b for b in text[start : match.start()].encode())
        ids.append(SPECIAL_TEXT[match.group()])
        start = match.end()
    ids.extend(BYTE_BASE + b for b in text[start:].encode())
    return ids


def decode_bytes(token_ids: Iterable[int]) -> str:
    """The text of byte tokens; specials are skipped, as clients decode with ``skip_special_tokens``."""
    data = bytes(t - BYTE_BASE for t in token_ids if BYTE_BASE <= t < BYTE_BASE + 256)
    return data.decode(errors="replace")


def _decode_byte_token(token_id: int) -> str:
    return chr(token_id - BYTE_BASE) if BYTE_BASE <= token_id < BYTE_BASE + 128 else ""


def render_chat_bytes(messages: Sequence[tuple[str, str]]) -> list[int]:
    """bytes-v1's chat prompt: the same markers, the contents' bytes between them."""
    return _rendered(encode_bytes, messages)


@dataclass(frozen=True)
class Tokenizer:
    """One tokenizer, as the fakes and the reference frontend use it; ``generate`` draws a token the fake emits."""

    name: str
    encode: Callable[[str], list[int]]
    render_chat: Callable[[Sequence[tuple[str, str]]], list[int]]
    decode: Callable[[Iterable[int]], str]
    decode_token: Callable[[int], str]
    generate: Callable[[random.Random], int]
    first_token: int  # a real token a prefill worker hands over when its draw was EOS


WORDS = Tokenizer(
    TOKENIZER_NAME,
    encode,
    render_chat,
    decode,
    decode_token,
    lambda rng: FIRST_WORD_ID + rng.randrange(VOCAB_SIZE - FIRST_WORD_ID),
    FIRST_WORD_ID,
)
BYTES = Tokenizer(
    BYTES_NAME,
    encode_bytes,
    render_chat_bytes,
    decode_bytes,
    _decode_byte_token,
    lambda rng: BYTE_BASE + GENERATED_BYTES[rng.randrange(len(GENERATED_BYTES))],
    BYTE_BASE + GENERATED_BYTES[0],
)
KNOWN = {t.name: t for t in (WORDS, BYTES)}


def by_name(name: str) -> Tokenizer:
    """The tokenizer a model card names; a ValueError naming the known ones for any other."""
    found = KNOWN.get(name)
    if found is None:
        raise ValueError(f"unknown tokenizer {name!r}; known: {', '.join(sorted(KNOWN))}")
    return found
