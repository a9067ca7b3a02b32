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
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable, Sequence
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


def render_chat(messages: Sequence[tuple[str, str]]) -> list[int]:
    """Token ids of a chat prompt: each (role, content) as a role marker then its content."""
    ids: list[int] = []
    for role, content in messages:
        ids.append(ROLE_IDS.get(role, ROLE_IDS["user"]))
        ids.extend(encode(content))
    ids.append(ROLE_IDS["assistant"])
    return ids


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
