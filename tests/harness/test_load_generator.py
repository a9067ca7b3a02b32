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


def test_prompt_lengths_spread_evenly_around_the_isl_and_every_window_keeps_its_mean() -> None:
    lengths = load_generator.prompt_lengths(400, 256, 0.25)
    assert min(lengths) >= 192 and max(lengths) <= 320 and len(set(lengths)) > 50
    for start in range(0, 400 - 20, 20):  # any 20 consecutive requests: the mean within 3 % of the ISL
        window = lengths[start : start + 20]
        assert abs(sum(window) / len(window) - 256) < 0.03 * 256, (start, window)
    assert load_generator.prompt_lengths(400, 256, 0.25) == lengths  # deterministic
    assert load_generator.prompt_lengths(5, 256, 0.0) == [256] * 5


def test_a_scheduled_prompt_has_the_length_its_spread_gives_it() -> None:
    arrivals = load_generator.as_token_ids(load_generator.schedule(Constant(10.0), 2.0, 1.0, isl=100, osl=8, isl_spread=0.2))
    assert [len(a.prompt) for a in arrivals] == load_generator.prompt_lengths(len(arrivals), 100, 0.2)
