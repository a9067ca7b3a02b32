"""The suite's own open-loop load generator: requests at scheduled moments, timed exactly.

Conformance scenarios must not depend on how fast the implementation answers (a closed loop
slows down when the system does, hiding the overload a planner must react to), and must stay in
the suite's process (locust is for ``servecert load run`` and nightly runs). So a scenario is a
list of ``Arrival``s — built from a ``servecert.load.shapes`` shape and a peak rate in simulated time
(``schedule``), or from a Mooncake trace (``trace_schedule``) — and ``run`` sends each at its real
moment, streaming, timing every token with ``servecert.load.sse.StreamTiming``. At most ``max_in_flight``
requests are outstanding (bounded memory); an arrival that finds the limit reached waits and is
counted as ``late``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp

from servecert.load import prompts, sse
from servecert.load.shapes import Shape, arrival_times
from servecert.load.shapes.trace import TraceReplay
from servecert.protocol import tokenizer


@dataclass(frozen=True)
class Arrival:
    at_s: float  # real seconds after the start of the run
    prompt: str | list[int]  # text, or the suite tokenizer's ids for it (``as_token_ids``)
    max_tokens: int


@dataclass(frozen=True)
class Result:
    sent_s: float  # real seconds after the start of the run
    ok: bool
    error: str
    ttft_s: float | None
    tpot_s: float | None
    tokens: int
    e2e_s: float
    late: bool = False
    detail: str = ""  # what the error said: the response body of an HTTP error, the exception of a transport one
    prompt_fingerprint: str = ""  # the suite tokenizer's fingerprint of the prompt: the key of its ground-truth records


GOLDEN_FRACTION = 0.6180339887498949


def prompt_lengths(count: int, isl: int, spread: float) -> list[int]:
    """``count`` prompt lengths of mean ``isl``, each ``isl x (1 + spread x u)`` with ``u`` in [-1, 1].

    ``u`` follows the golden-ratio sequence: deterministic, and spread so evenly that any run of
    consecutive requests has nearly the mean ``isl`` (a random draw's windows would wander from it)."""
    if spread <= 0:
        return [isl] * count
    return [max(1, round(isl * (1 + spread * (2 * ((i * GOLDEN_FRACTION) % 1.0) - 1)))) for i in range(1, count + 1)]


def schedule(shape: Shape, peak_rps: float, time_scale: float, isl: int, osl: int, isl_spread: float = 0.0) -> list[Arrival]:
    """Arrivals of ``shape`` (simulated seconds, ``peak_rps`` per simulated second) in real seconds; prompt lengths
    ``isl`` ± ``isl_spread`` (a fraction, ``prompt_lengths``)."""
    scale = time_scale if time_scale > 0 else 1.0
    times = list(arrival_times(shape, peak_rps))
    lengths = prompt_lengths(len(times), isl, isl_spread)
    return [Arrival(t / scale, prompts.unique_prompt(n), osl) for t, n in zip(times, lengths, strict=True)]


def trace_schedule(replay: TraceReplay, time_scale: float, block_tokens: int) -> list[Arrival]:
    scale = time_scale if time_scale > 0 else 1.0
    return [
        Arrival(t / scale, prompts.trace_prompt(e.hash_ids, e.input_length, block_tokens), max(1, e.output_length))
        for t, e in replay.arrivals()
    ]


def as_token_ids(arrivals: Sequence[Arrival]) -> list[Arrival]:
    """The same arrivals with each prompt sent as the suite tokenizer's ids (the OpenAI API's integer-array prompt).

    For a frontend whose own tokenizer does not count the suite's words as the suite does: Dynamo's, over the
    generated model folder's byte-level BPE, makes about five tokens of a prompt word, so a scenario of ISL 256 would
    send it ~1,280. The ids are what the suite's tokenizer, and so the reference frontend, makes of the text."""
    return [
        a if not isinstance(a.prompt, str) else Arrival(a.at_s, tokenizer.encode(a.prompt), a.max_tokens) for a in arrivals
    ]


async def one(session: aiohttp.ClientSession, url: str, model: str, arrival: Arrival, started: float, timeout_s: float) -> Result:
    body = {"model": model, "prompt": arrival.prompt, "max_tokens": arrival.max_tokens, "min_tokens": arrival.max_tokens,
            "ignore_eos": True, "stream": True}
    sent = time.perf_counter()
    timing = sse.StreamTiming(sent)
    try:
        async with session.post(url + "/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                timing.error = sse.HTTP.format(status=resp.status)
                timing.error_detail = " ".join((await resp.text(errors="replace")).split())[:300]
            else:
                async for line in resp.content:
                    timing.feed(line, time.perf_counter())
    except (aiohttp.ClientError, TimeoutError) as exc:
        timing.error, timing.error_detail = sse.TRANSPORT, repr(exc)
    end = time.perf_counter()
    timing.finish(end)
    return Result(
        sent - started, not timing.error, timing.error, timing.ttft_s, timing.tpot_s, timing.tokens, end - sent,
        detail=timing.error_detail, prompt_fingerprint=fingerprint(arrival),
    )


def fingerprint(arrival: Arrival) -> str:
    """What the fake engines record as the prompt's ``prompt_fingerprint`` (``servecert.fakes.groundtruth``)."""
    ids = tokenizer.encode(arrival.prompt) if isinstance(arrival.prompt, str) else arrival.prompt
    return tokenizer.fingerprint(ids)


async def run(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    arrivals: Sequence[Arrival],
    *,
    max_in_flight: int = 512,
    timeout_s: float = 30.0,
    started: float | None = None,
) -> list[Result]:
    """Send every arrival at its moment (relative to ``started``, default now); results in arrival order."""
    started = time.perf_counter() if started is None else started
    gate = asyncio.Semaphore(max_in_flight)
    tasks: list[asyncio.Task[Result]] = []
    late: set[int] = set()

    async def send(i: int, arrival: Arrival) -> Result:
        try:
            result = await one(session, url, model, arrival, started, timeout_s)
        finally:
            gate.release()
        return Result(**{**result.__dict__, "late": i in late})

    for i, arrival in enumerate(arrivals):
        delay = started + arrival.at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if gate.locked():
            late.add(i)
        await gate.acquire()
        tasks.append(asyncio.get_running_loop().create_task(send(i, arrival)))
    return list(await asyncio.gather(*tasks))
