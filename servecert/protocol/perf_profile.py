"""Pre-deployment profiling data for a planner's perf model: what the suite hands a planner, and what both read from it.

Seed 003's perf model is "bootstrapped from the first available source", among them
"profile_results_dir NPZ/JSON fallback data", with two interpolators: "Prefill interpolator: Maps
(throughput_per_gpu, ISL) -> TTFT" and "Decode interpolator: Maps (throughput_per_gpu,
context_length) -> ITL". A ``PerfProfile`` is one such sweep per component at one request mix.
The suite puts it in ``PlannerSpec.profile``; an adapter writes it in the form its planner reads
(the reference planner takes it as is; Dynamo's reads the profiler's NPZ files). Because the suite
wrote it, the suite knows the capacity it implies at the SLA, and so the least throughput floor a
planner that sizes replicas as ceil(predicted load / capacity) may write.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

Points = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class PerfProfile:
    """Pre-deployment profiling data for the planner's perf model (seed 003: "profile_results_dir NPZ/JSON
    fallback data"; "Prefill interpolator: Maps (throughput_per_gpu, ISL) -> TTFT. Decode interpolator: Maps
    (throughput_per_gpu, context_length) -> ITL").

    One sweep per component at the deployment's request mix: ``prefill`` is ``(tokens/s per GPU, TTFT ms)`` at
    ISL ``isl``; ``decode`` is ``(tokens/s per GPU, ITL ms)`` at context length ``context``; each in rising
    throughput, latency interpolated linearly between points. An adapter writes them in whatever form its
    planner reads (Dynamo: the profiler's NPZ files).
    """

    isl: int
    context: int
    prefill: Points
    decode: Points

    def capacity_per_gpu(self, component: str, sla_ms: float) -> float:
        """The largest throughput (tokens/s per GPU) whose profiled latency stays within ``sla_ms``."""
        return largest_within(self.prefill if component == "prefill" else self.decode, sla_ms)


def largest_within(points: Points, limit: float) -> float:
    """On the piecewise-linear curve through ``points`` (x rising), the largest x whose y is <= ``limit``."""
    best = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if y0 <= limit:
            best = max(best, x0)
        if y0 <= limit < y1:
            best = max(best, x0 + (x1 - x0) * (limit - y0) / (y1 - y0))
    if points and points[-1][1] <= limit:
        best = max(best, points[-1][0])
    return best
