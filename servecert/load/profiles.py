"""Load profiles for ``servecert load run``: a shape, a user model, a request mix, goodput thresholds.

A profile's shape is defined over its own ``shape.duration_s``; ``--duration`` stretches it in
time (``Stretched``), ``--users`` sets the peak user count. Users are closed-loop with
``constant_throughput(per_user_rps)`` pacing, so while latency stays under 1/per_user_rps a
user sends ``per_user_rps`` requests per second and the offered rate follows the shape; trace
profiles replay their timestamps instead. The request mix and the goodput thresholds default to
the PLANNER-SCALING scenarios' (ISL 256, OSL 32, TTFT 1000 ms, ITL 100 ms: the suite's slow
scenario engines at time scale 1), so ``scaling-*`` profiles replay the suite's scenarios in
real time against ``servecert planner demo``. Each profile's ``limits`` (``servecert.load.verdict``) judge
the run: by default no failed request and at least 95% of requests within both thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from servecert.load.shapes import Shape
from servecert.load.shapes.burst import Burst
from servecert.load.shapes.constant import Constant
from servecert.load.shapes.diurnal import Diurnal
from servecert.load.shapes.ramp import Ramp
from servecert.load.shapes.step import Step

TRACES = Path(__file__).with_name("traces")
# NB: 0.95 is PLANNER-SCALING's planner_sla_attainment (servecert.conformance.suite.timeouts); load is a leaf and does not import it.
DEFAULT_LIMITS = ("error_rate<=0", "goodput.fraction>=0.95")


@dataclass(frozen=True)
class Stretched:
    """``shape`` played over ``duration_s`` instead of its own duration."""

    shape: Shape
    duration_s: float

    def level(self, t: float) -> float:
        return self.shape.level(t * self.shape.duration_s / self.duration_s)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    shape: Shape
    users: int = 12
    per_user_rps: float = 0.4
    isl: int = 256
    osl: int = 32
    ttft_ms: float = 1000.0
    itl_ms: float = 100.0
    model: str = "servecert-planner-model"
    trace: Path | None = None
    block_tokens: int = 64
    trace_speedup: float = 1.0
    limits: tuple[str, ...] = DEFAULT_LIMITS  # servecert.load.verdict.Limit syntax, e.g. "ttft_ms.p95<=1000"

    def with_duration(self, duration_s: float | None) -> Profile:
        if duration_s is None or duration_s == self.shape.duration_s:
            return self
        return replace(self, shape=Stretched(self.shape, duration_s))


def _p(*args: object, **kwargs: object) -> Profile:
    return Profile(*args, **kwargs)  # type: ignore[arg-type]


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _p("constant", "Constant load at the peak user count.", Constant(300.0)),
        _p("step", "25% of peak, then a x4 step to the peak at a quarter of the run.", Step(300.0, ((0.0, 0.25), (75.0, 1.0)))),
        _p("ramp", "Linear ramp from 10% to the peak over the run.", Ramp(300.0, ((0.0, 0.1), (300.0, 1.0)))),
        _p("burst", "25% of peak with one burst to the peak for a sixth of the run.", Burst(300.0, base=0.25, start=120.0, length=50.0)),
        _p("diurnal", "Sine between 25% and the peak, two cycles per run.", Diurnal(300.0, period_s=150.0)),
        _p("trace", "Replay of the bundled Mooncake-format trace (shared prefixes by hash id).", Constant(300.0),
           trace=TRACES / "mooncake_sample.jsonl", users=32),
        _p("scaling-step", "PLANNER-SCALING step x4: 25% -> 100% at a quarter of the run -> 25% at three quarters.",
           Step(600.0, ((0.0, 0.25), (150.0, 1.0), (450.0, 0.25)))),
        _p("scaling-ramp", "PLANNER-SCALING ramp: 25% -> 100% over half the run, then steady.", Ramp(600.0, ((0.0, 0.25), (300.0, 1.0)))),
        _p("scaling-burst", "PLANNER-SCALING burst: 33% with a burst to 100% for a fifth of the run.",
           Burst(600.0, base=0.33, start=200.0, length=120.0)),
        _p("scaling-diurnal", "PLANNER-SCALING diurnal: sine between 33% and 100%, period = the run.",
           Diurnal(600.0, period_s=600.0, low=0.33)),
        _p("scaling-trace", "PLANNER-SCALING trace replay (Mooncake format) at its own pace.", Constant(600.0),
           trace=TRACES / "mooncake_sample.jsonl", users=32),
        _p("rollout", "Steady 50% of peak for the length of a rollout (the rollout scenarios run their change meanwhile).",
           Constant(600.0, fraction=0.5)),
        _p("nightly", "Nightly: a long diurnal run (4 h, two 2-hour cycles) against the reference deployment.",
           Diurnal(4 * 3600.0, period_s=2 * 3600.0, low=0.25)),
    )
}


class UnknownProfileError(LookupError):
    """A profile name that does not exist; the message lists the known ones."""


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfileError(f"no load profile named {name!r}; known: {', '.join(sorted(PROFILES))}") from None
