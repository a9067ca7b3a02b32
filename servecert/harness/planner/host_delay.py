"""What the host delayed: how far the fake engines ran behind their timing model, per request.

Simulated time at scale 4 turns one real second of CPU the machine did not give a fake engine
into four simulated seconds of a request's TTFT or TPOT. Every engine counts that lateness itself
(``servecert.fakes.engine``: an iteration longer than its priced time is late by the difference) and writes,
on each request's ground-truth record, the lateness of the iterations the request waited or ran
through, before and after its first token. Here those records are gathered (from the engines in
the suite's process, or from the files a cluster's engine pods leave behind) and joined to the
client's results by prompt fingerprint, so a judge can take from a request's timings the part the
harness itself imposed, and judge the rest: what the implementation's decisions made of it.

Data flow: engine records -> ``HostDelays.of(records, results)`` -> ``HostDelays.timings(result)``
(TTFT and TPOT less the engines' lateness, real seconds).

Only what the engines measured is taken away, never more: a request whose records are missing
(a pod whose file is gone, an engine outside the suite's reach) or whose prompt the client sent
twice keeps its timings as the client saw them. Not counted, so still the implementation's: the
router's and planner's own delays, the KV transfer, and the second-order effect of lateness (a
late engine holds more sequences at once, and the timing model prices a fuller KV cache higher).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servecert.fakes import groundtruth
from servecert.fakes.pod_runner.runner import groundtruth_dir
from servecert.harness.load_generator import Result

SERVED = (groundtruth.OK, groundtruth.PREFILLED)


@dataclass(frozen=True)
class Behind:
    """Real seconds the engines serving one request ran behind their timing model."""

    to_first_token_s: float = 0.0
    after_first_token_s: float = 0.0

    def __add__(self, other: Behind) -> Behind:
        return Behind(self.to_first_token_s + other.to_first_token_s, self.after_first_token_s + other.after_first_token_s)


@dataclass(frozen=True)
class HostDelays:
    by_prompt: Mapping[str, Behind]

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]], results: Sequence[Result]) -> HostDelays:
        """Per prompt sent exactly once, the lateness summed over the records that served it (a prefill and a decode
        record in disaggregated mode, one aggregated record otherwise)."""
        sent = Counter(r.prompt_fingerprint for r in results if r.prompt_fingerprint)
        out: dict[str, Behind] = {}
        for record in records:
            fp = str(record.get("prompt_fingerprint") or "")
            if sent.get(fp) != 1 or record.get("outcome") not in SERVED:
                continue
            late = Behind(float(record.get("behind_to_first_token_s") or 0.0), float(record.get("behind_after_first_token_s") or 0.0))
            out[fp] = out.get(fp, Behind()) + late
        return cls(out)

    def behind(self, result: Result) -> Behind:
        return self.by_prompt.get(result.prompt_fingerprint, Behind())

    def timings(self, result: Result) -> tuple[float | None, float | None]:
        """(TTFT, TPOT) in real seconds, less what the engines ran behind their model (never below zero)."""
        late = self.behind(result)
        ttft = None if result.ttft_s is None else max(0.0, result.ttft_s - late.to_first_token_s)
        if result.tpot_s is None:
            return ttft, None
        steps = max(1, result.tokens - 1)
        return ttft, max(0.0, result.tpot_s - late.after_first_token_s / steps)

    def summary(self) -> str:
        if not self.by_prompt:
            return "no engine lateness recorded"
        firsts = sorted(b.to_first_token_s for b in self.by_prompt.values())
        afters = sorted(b.after_first_token_s for b in self.by_prompt.values())
        return (
            f"engines behind their timing model (real ms, median/max per request, {len(firsts)} requests joined): "
            f"to first token {firsts[len(firsts) // 2] * 1000:.0f}/{firsts[-1] * 1000:.0f}, "
            f"after it {afters[len(afters) // 2] * 1000:.0f}/{afters[-1] * 1000:.0f}"
        )


def pod_records(pods_dir: Path, namespace: str) -> list[dict[str, Any]]:
    """Every record the engine pods of ``namespace`` wrote (the files outlive the pods)."""
    folder = groundtruth_dir(pods_dir)
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob(f"{namespace}_*.jsonl")):
        out += groundtruth.read_json_lines(path)
    return out
