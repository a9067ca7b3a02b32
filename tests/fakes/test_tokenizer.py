"""The suite's tokenizer is deterministic and its block hashes are chained."""

from __future__ import annotations

import subprocess
import sys

from servecert.protocol import tokenizer


def test_the_same_text_gives_the_same_ids_in_another_process() -> None:
    text = "The quick brown fox, internationalization!"
    here = tokenizer.encode(text)
    code = f"from servecert.protocol import tokenizer; print(tokenizer.encode({text!r}))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30).stdout
    assert str(here) == there.strip()


def test_words_and_punctuation_are_pieces_and_long_words_are_split() -> None:
    assert len(tokenizer.encode("hello, world")) == 3
    assert len(tokenizer.encode("internationalization")) == 3  # 20 chars -> 8 + 8 + 4
    assert all(tokenizer.FIRST_WORD_ID <= t < tokenizer.VOCAB_SIZE for t in tokenizer.encode("a b c"))


def test_decoding_is_deterministic_and_skips_special_ids() -> None:
    assert tokenizer.decode([300, 301]) == tokenizer.decode([300, 301])
    assert tokenizer.decode([tokenizer.EOS_ID]) == ""


def test_chat_rendering_marks_roles_and_ends_with_the_assistant() -> None:
    ids = tokenizer.render_chat([("system", "be brief"), ("user", "hi")])
    assert ids[0] == tokenizer.ROLE_IDS["system"]
    assert ids[-1] == tokenizer.ROLE_IDS["assistant"]
    assert len(ids) == 1 + 2 + 1 + 1 + 1


def test_block_hashes_cover_full_blocks_and_depend_on_every_earlier_token() -> None:
    a = list(range(1000, 1040))
    b = [*a[:20], 7, *a[21:]]
    ha, hb = tokenizer.block_hashes(a, 16), tokenizer.block_hashes(b, 16)
    assert len(ha) == 2  # 40 tokens: two full blocks, the partial third has no hash
    assert ha[0] == hb[0]
    assert ha[1] != hb[1]
    c = [*a[:10], 9, *a[11:]]
    assert tokenizer.block_hashes(c, 16)[1] != ha[1]  # a change in block 0 changes block 1's hash too
