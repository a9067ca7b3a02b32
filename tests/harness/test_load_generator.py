"""The planner scenarios' open-loop generator: prompts as the suite tokenizer's ids, for a frontend that tokenizes otherwise."""

from __future__ import annotations

from servecert.harness import load_generator
from servecert.load.shapes.constant import Constant
from servecert.load.shapes.trace import TraceEntry, TraceReplay
from servecert.protocol import tokenizer


def test_token_id_prompts_are_the_suite_tokenizers_ids_of_the_same_text_at_the_same_moments() -> None:
    texts = load_generator.schedule(Constant(4.0), 2.0, 2.0, isl=256, osl=8)
    ids = load_generator.as_token_ids(texts)
    assert [(a.at_s, a.max_tokens) for a in ids] == [(a.at_s, a.max_tokens) for a in texts]
    for text, as_ids in zip(texts, ids, strict=True):
        assert isinstance(text.prompt, str) and as_ids.prompt == tokenizer.encode(text.prompt)
        assert len(as_ids.prompt) == 256  # the scenario's ISL, in the suite's tokens


def test_a_replayed_traces_shared_blocks_stay_shared_as_ids() -> None:
    replay = TraceReplay((TraceEntry(0.0, 128, 4, (7, 8)), TraceEntry(500.0, 128, 4, (7, 9))))
    first, second = (a.prompt for a in load_generator.as_token_ids(load_generator.trace_schedule(replay, 1.0, 64)))
    assert isinstance(first, list) and isinstance(second, list)
    assert first[:64] == second[:64] and first[64:] != second[64:]
