"""Timing one OpenAI streaming response exactly, from its SSE lines (no locust, no aiohttp).

Feed each received ``data:`` line with the moment it arrived; ``StreamTiming`` keeps the time of
every content chunk. TTFT = first content chunk - send; ITL = every gap between consecutive
content chunks; TPOT = (last - first) / (tokens - 1) (vLLM's per-request definition). A chunk
with ``finish_reason`` set and no text is not a token. An ``error`` event, a missing ``[DONE]``
and an HTTP error are kept as an error kind for the report.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

OK = ""
HTTP = "http_{status}"
STREAM_ERROR = "stream_error"
STREAM_CUT = "stream_cut"
TRANSPORT = "transport"
CUT_AT_END = "cut_at_end"  # still in flight when the run's stop timeout ran out: the harness's cut, not a failure


@dataclass
class StreamTiming:
    sent: float
    token_times: list[float] = field(default_factory=list)
    done: bool = False
    error: str = OK
    error_detail: str = ""
    usage_tokens: int | None = None
    end: float | None = None

    def feed(self, line: bytes, now: float) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if "error" in event:
            self.error = self.error or STREAM_ERROR
            err = event["error"]
            self.error_detail = str(err.get("code") or err.get("message")) if isinstance(err, dict) else str(err)
            return
        if event.get("usage"):
            self.usage_tokens = int(event["usage"].get("completion_tokens", 0))
        for choice in event.get("choices") or ():
            text = choice.get("text")
            if text is None:
                text = (choice.get("delta") or {}).get("content")
            if text:
                self.token_times.append(now)

    def finish(self, now: float) -> None:
        self.end = now
        if not self.error and not self.done:
            self.error = STREAM_CUT

    @property
    def tokens(self) -> int:
        return len(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.sent if self.token_times else None

    @property
    def itls_s(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in itertools.pairwise(t)]

    @property
    def tpot_s(self) -> float | None:
        t = self.token_times
        return (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None
