"""Joining the engines' lateness to the client's results: only what was measured, only where the join is certain."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.harness.load_generator import Result
from servecert.harness.planner.host_delay import Behind, HostDelays


def result(fp: str, ttft_s: float = 0.5, tpot_s: float = 0.1, tokens: int = 11) -> Result:
    return Result(1.0, True, "", ttft_s, tpot_s, tokens, 2.0, prompt_fingerprint=fp)


def record(fp: str, outcome: str = "ok", first: float = 0.0, after: float = 0.0) -> dict[str, Any]:
    return {"prompt_fingerprint": fp, "outcome": outcome, "behind_to_first_token_s": first, "behind_after_first_token_s": after}


def test_a_disaggregated_request_sums_its_prefill_and_decode_records() -> None:
    delays = HostDelays.of([record("a", "prefilled", first=0.2), record("a", "ok", first=0.05, after=0.5)], [result("a")])
    assert delays.behind(result("a")) == Behind(pytest.approx(0.25), 0.5)
    ttft, tpot = delays.timings(result("a"))
    assert ttft == pytest.approx(0.25)
    assert tpot == pytest.approx(0.1 - 0.5 / 10)  # 11 tokens: 10 steps after the first


def test_an_aborted_or_failed_record_excuses_nothing() -> None:
    delays = HostDelays.of([record("a", "aborted", first=0.3), record("a", "injected_error", after=0.3)], [result("a")])
    assert delays.timings(result("a")) == (0.5, 0.1)


def test_a_prompt_sent_twice_is_judged_as_the_client_saw_it() -> None:
    sent = [result("a"), result("a"), result("b")]
    delays = HostDelays.of([record("a", first=0.3), record("b", first=0.3)], sent)
    assert delays.timings(sent[0]) == (0.5, 0.1)
    assert delays.timings(sent[2])[0] == pytest.approx(0.2)


def test_a_request_without_records_keeps_its_timings() -> None:
    assert HostDelays.of([], [result("a")]).timings(result("a")) == (0.5, 0.1)


def test_lateness_never_makes_a_timing_negative() -> None:
    delays = HostDelays.of([record("a", first=2.0, after=5.0)], [result("a")])
    assert delays.timings(result("a")) == (0.0, 0.0)
