"""Mooncake trace replay: JSONL ``{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}``.

Each hash id stands for one block of ``block_tokens`` prompt tokens (512 in the public FAST'25
traces); requests sharing leading hash ids share that prefix, which ``servecert.load.prompts.trace_prompt``
turns into identical leading words, so prefix caches and KV-aware routers see real reuse.
``speedup`` compresses the trace's clock. ``synthetic`` writes a deterministic trace of the same
format (sessions that reuse a system prompt and their own history), for tests and CI.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TraceEntry:
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]

    def to_json(self) -> str:
        return json.dumps(
            {"timestamp": self.timestamp_ms, "input_length": self.input_length, "output_length": self.output_length,
             "hash_ids": list(self.hash_ids)}
        )


def read_jsonl(path: Path) -> list[TraceEntry]:
    """Parse a Mooncake trace; a bad line raises ValueError naming the file and line."""
    out: list[TraceEntry] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append(TraceEntry(float(row["timestamp"]), int(row["input_length"]), int(row["output_length"]),
                                  tuple(int(h) for h in row.get("hash_ids", ()))))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a Mooncake trace line ({exc})") from None
    return sorted(out, key=lambda e: e.timestamp_ms)


def write_jsonl(entries: Iterable[TraceEntry], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(e.to_json() + "\n" for e in entries))
    return path


@dataclass(frozen=True)
class TraceReplay:
    entries: tuple[TraceEntry, ...]
    speedup: float = 1.0

    @property
    def duration_s(self) -> float:
        return self.entries[-1].timestamp_ms / 1000.0 / self.speedup + 1.0 if self.entries else 0.0

    def level(self, t: float) -> float:
        return 1.0  # NB: arrivals come from the timestamps; locust keeps a fixed pool of users to replay them

    def arrivals(self) -> Iterator[tuple[float, TraceEntry]]:
        """(second after the start, entry) in time order."""
        start = self.entries[0].timestamp_ms if self.entries else 0.0
        for e in self.entries:
            yield (e.timestamp_ms - start) / 1000.0 / self.speedup, e


def synthetic(
    requests: int,
    rate_rps: float,
    *,
    seed: int = 0,
    block_tokens: int = 512,
    sessions: int = 8,
    system_blocks: int = 2,
    turn_blocks: int = 1,
    output_length: int = 32,
) -> list[TraceEntry]:
    """A Mooncake-format trace: ``sessions`` conversations sharing a system prompt, each turn
    extending its own history (so later turns reuse earlier ones' hash ids), Poisson arrivals."""
    rng = random.Random(seed)
    system = list(range(system_blocks))
    next_id = system_blocks
    history: dict[int, list[int]] = {s: [] for s in range(sessions)}
    out, t = [], 0.0
    for _ in range(requests):
        t += rng.expovariate(rate_rps) * 1000.0
        s = rng.randrange(sessions)
        if len(history[s]) > 4 * turn_blocks:  # a conversation that grew long starts over
            history[s] = []
        history[s].extend(range(next_id, next_id + turn_blocks))
        next_id += turn_blocks
        ids = system + history[s]
        out.append(TraceEntry(round(t, 3), len(ids) * block_tokens, output_length, tuple(ids)))
    return out
