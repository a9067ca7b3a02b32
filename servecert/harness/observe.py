"""Ground truth, as the suite's fake engines recorded it — never the implementation's own report.

``GroundTruth`` pulls every engine's records over HTTP (``/groundtruth?since=N``), keeping a
cursor per engine and the records of engines that have since gone away, so a test can read what
happened across workers joining and leaving. ``Transfers`` and ``by_prompt`` give the views
conformance checks need: which KV transfers happened between which domains, and what happened to
the request a test sent with a given prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from servecert.adapters.contract import WorkerRef
from servecert.protocol import tokenizer


@dataclass(frozen=True)
class Transfer:
    request_id: str
    source: str
    dest: str
    source_domains: dict[str, str]
    dest_domains: dict[str, str]
    distance: str
    duration_ms: float

    def crosses(self, level: str) -> bool:
        """True when the two ends differ at ``level`` or one of them lacks it."""
        a, b = self.source_domains.get(level), self.dest_domains.get(level)
        return a is None or b is None or a != b


class GroundTruth:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.records: list[dict[str, Any]] = []
        self._cursor: dict[str, int] = {}

    async def refresh(self, workers: Iterable[WorkerRef]) -> list[dict[str, Any]]:
        """Fetch what is new from every live worker; returns all records seen so far."""
        for ref in workers:
            since = self._cursor.get(ref.engine_id, 0)
            async with self.session.get(f"{ref.url}/groundtruth?since={since}") as resp:
                resp.raise_for_status()
                body = await resp.json()
            for record in body["records"]:
                self.records.append(record)
                self._cursor[ref.engine_id] = max(self._cursor.get(ref.engine_id, 0), int(record["seq"]))
        return self.records

    def transfers(self) -> list[Transfer]:
        out = []
        for r in self.records:
            t = r.get("transfer")
            if t:
                out.append(
                    Transfer(
                        r["request_id"], t["source_engine"], t["dest_engine"], t["source_domains"], t["dest_domains"],
                        t["distance"], float(t["duration_ms"]),
                    )
                )
        return out

    def by_prompt(self, prompt: str) -> list[dict[str, Any]]:
        """Records of requests whose prompt was ``prompt`` (completions, the suite's tokenizer)."""
        return self.by_tokens(tokenizer.encode(prompt))

    def by_tokens(self, token_ids: Sequence[int]) -> list[dict[str, Any]]:
        fp = tokenizer.fingerprint(token_ids)
        return [r for r in self.records if r.get("prompt_fingerprint") == fp]
