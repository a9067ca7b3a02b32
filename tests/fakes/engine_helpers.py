"""Driving an in-process engine without HTTP: submit requests and read their tokens."""

from __future__ import annotations

import asyncio
import itertools

from servecert.fakes.engine import Engine, Seq
from servecert.protocol.engine_api import EngineRequest, Sampling

_ids = itertools.count(1)
WAIT_SECONDS = 20.0


def request(prompt: list[int], max_tokens: int = 4, **sampling: object) -> EngineRequest:
    values: dict[str, object] = {"max_tokens": max_tokens, "ignore_eos": True}
    values.update(sampling)
    return EngineRequest(
        request_id=f"r{next(_ids)}",
        model="m",
        token_ids=tuple(prompt),
        sampling=Sampling(**values),  # type: ignore[arg-type]
        mdc_checksum=None,
    )


def submit(engine: Engine, req: EngineRequest) -> Seq:
    engine.check(req, prefill=engine.config.role == "prefill")
    return engine.admit(req, engine.new_record(req))


async def tokens_of(seq: Seq) -> list[int]:
    out: list[int] = []

    async def drain() -> None:
        while not seq.stream.done or seq.stream.tokens:
            out.extend(await seq.stream.next_tokens())

    await asyncio.wait_for(drain(), WAIT_SECONDS)
    return out


def prompt(n: int, start: int = 1000) -> list[int]:
    return list(range(start, start + n))
