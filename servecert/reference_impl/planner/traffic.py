"""OBSERVE, traffic: requests, input and output lengths per window, from the engines' Prometheus.

The throughput loop needs the request rate and the mean ISL/OSL of the last window. Decode (or
aggregated) engines count every finished request in ``vllm:request_success_total`` and the
lengths in the ``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens`` histograms;
``TrafficMeter.sample`` scrapes them, keeps the last value per engine and returns the growth
since the previous sample. Arrivals, not completions, are what the next window must serve: a
bottleneck (say too few prefill workers) throttles completions, so the meter adds the growth of
the requests still inside the engines (``vllm:num_requests_waiting`` + ``running`` of every
engine): arrivals = completions + growth of the backlog. An engine first seen after the meter's first sample is new (a
worker the planner added): its counters started at zero with it, so all of them count in the window it appeared in; so
does a counter that went down (the engine restarted: Prometheus's counter reset). Counting such an engine only from its
next scrape lost a window of every added worker's requests: right after a x4 step the two added engines' windows read
2.0 requests/s of 3.84, the floor fell and the load rule removed a worker the load needed (PlannerScalingStepReachesSla
on a cluster, 72% within SLA). An engine listed but not answering keeps its last counters, so its next answer counts
the whole gap once, not its whole life. A removed engine's last increments are lost (a slight underestimate).
Dynamo reads the frontend's Prometheus instead; the engines' counters are the same numbers.

KV hit rate (seed 003, Step 1): the share of prompt tokens the prefilling engines (prefill or
aggregated) found in their prefix cache over the window, from ``vllm:prefix_cache_hits`` over
``vllm:prefix_cache_queries``; None when no prompt was looked up (the planner then keeps its last
valid value: "last-value semantics"). Speculative decoding's accept length likewise, from the
decoding engines (decode or aggregated): 1 + ``vllm:spec_decode_num_accepted_tokens`` over
``vllm:spec_decode_num_drafts`` (tokens per verified draft); None in a window without drafts.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("servecert.planner.traffic")
SUCCESS = "vllm:request_success_total"
PROMPT_SUM = "vllm:request_prompt_tokens_sum"
GENERATION_SUM = "vllm:request_generation_tokens_sum"
IN_SYSTEM = ("vllm:num_requests_waiting", "vllm:num_requests_running")
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


@dataclass(frozen=True)
class TrafficSample:
    requests: float
    isl: float  # mean prompt tokens of the window's requests (0 when none)
    osl: float
    seconds: float  # simulated seconds the window covered
    kv_hit_rate: float | None = None  # prompt tokens found in the prefix cache / looked up; None: none looked up
    accept_length: float | None = None  # tokens per speculative draft verified; None: no draft verified

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def merged(earlier: TrafficSample, later: TrafficSample) -> TrafficSample:
    """One sample spanning two consecutive windows (seed 003: the throughput loop "uses a longer traffic window")."""
    requests = earlier.requests + later.requests

    def mean(a: float, b: float) -> float:
        return (a * earlier.requests + b * later.requests) / requests if requests else 0.0

    hit_rate = later.kv_hit_rate if later.kv_hit_rate is not None else earlier.kv_hit_rate
    accept = later.accept_length if later.accept_length is not None else earlier.accept_length
    return TrafficSample(
        requests, mean(earlier.isl, later.isl), mean(earlier.osl, later.osl), earlier.seconds + later.seconds, hit_rate, accept
    )


def planned_rps(predicted: float, last: TrafficSample) -> float:
    """The rate the floor plans for: the prediction, but never below the last window's own rate. The two-window
    rate fed to the predictor keeps gauge noise from dropping a floor that a steady load needs; on a rise it lags
    by a window, and seed 003's observation window is one throughput interval, so the rise is taken at once (a
    floor raised on noise stays, since it drops only 20% below what one fewer engine serves)."""
    return max(predicted, last.rps)


@dataclass(frozen=True)
class _Counters:
    requests: float
    prompt_tokens: float
    generation_tokens: float
    in_system: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    spec_drafts: float = 0.0
    spec_accepted: float = 0.0


ZERO = _Counters(0.0, 0.0, 0.0)


class TrafficMeter:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self._last: dict[str, _Counters] = {}
        self._sampled = False

    def _baseline(self, engine_id: str, now: _Counters) -> _Counters | None:
        """What ``now`` grew from: the last scrape; zero for an engine added since the first sample or restarted; None
        for the engines of the first sample (the planner's start: their history is not this window's)."""
        before = self._last.get(engine_id)
        if before is None:
            return ZERO if self._sampled else None
        return ZERO if now.requests < before.requests else before

    async def sample(
        self, engines: Sequence[tuple[str, str]], seconds: float, prefilling: Collection[str] = (), decoding: Collection[str] = ()
    ) -> TrafficSample:
        """Scrape ``(engine_id, url)`` engines (all roles); arrivals since the last call over ``seconds`` simulated seconds.
        The KV hit rate counts the ``prefilling`` engines only (a decode engine receives its KV and looks nothing up), the
        accept length the ``decoding`` ones."""
        done = prompt = generated = backlog = queries = hits = drafts = accepted = 0.0
        seen: dict[str, _Counters] = {}
        for engine_id, url in engines:
            now = await self._scrape(url)
            if now is None:
                if engine_id in self._last:
                    seen[engine_id] = self._last[engine_id]
                continue
            seen[engine_id] = now
            before = self._baseline(engine_id, now)
            if before is not None:
                done += max(0.0, now.requests - before.requests)
                prompt += max(0.0, now.prompt_tokens - before.prompt_tokens)
                generated += max(0.0, now.generation_tokens - before.generation_tokens)
                backlog += now.in_system - before.in_system
                if engine_id in prefilling:
                    queries += max(0.0, now.prefix_queries - before.prefix_queries)
                    hits += max(0.0, now.prefix_hits - before.prefix_hits)
                if engine_id in decoding:
                    drafts += max(0.0, now.spec_drafts - before.spec_drafts)
                    accepted += max(0.0, now.spec_accepted - before.spec_accepted)
        self._last, self._sampled = seen, True
        arrivals = max(0.0, done + backlog)
        hit_rate = min(1.0, hits / queries) if queries > 0 else None
        accept = 1.0 + accepted / drafts if drafts > 0 else None
        return TrafficSample(
            arrivals, prompt / done if done else 0.0, generated / done if done else 0.0, seconds, hit_rate, accept
        )

    async def _scrape(self, url: str) -> _Counters | None:
        try:
            async with self.session.get(url + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.debug("cannot scrape %s: %r", url, exc)
            return None
        values = dict.fromkeys(
            (SUCCESS, PROMPT_SUM, GENERATION_SUM, PREFIX_QUERIES, PREFIX_HITS, SPEC_DRAFTS, SPEC_ACCEPTED, *IN_SYSTEM), 0.0
        )
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in values:
                    values[s.name] += float(s.value)
        return _Counters(
            values[SUCCESS],
            values[PROMPT_SUM],
            values[GENERATION_SUM],
            sum(values[k] for k in IN_SYSTEM),
            values[PREFIX_QUERIES],
            values[PREFIX_HITS],
            values[SPEC_DRAFTS],
            values[SPEC_ACCEPTED],
        )
