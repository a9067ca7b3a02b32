"""The planner's settings, in simulated time, and the conversion to real time.

Field names follow Dynamo's ``PlannerConfig`` where one exists (``ttft_ms``, ``itl_ms``, ``isl``,
``osl``, ``load_adjustment_interval_seconds`` -> ``load_interval_s``, ``min_endpoint``,
``max_gpu_budget``, ``*_engine_num_gpu``, ``load_scaling_down_sensitivity`` as a fraction).
``time_scale`` is simulated seconds per real second (the fake engines' meaning); 0 means the
engines run without delays, and then intervals are taken as real seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecert.protocol.perf_profile import PerfProfile

PREDICTORS = ("constant", "arima", "kalman")
DISAGG, AGG = "disagg", "agg"
MODES = (DISAGG, AGG)


class PlannerConfigError(ValueError):
    """Settings that cannot work together; the message names the fields and what to change."""


@dataclass(frozen=True)
class PlannerConfig:
    namespace: str = "dynamo"
    mode: str = DISAGG  # seed 003 "--mode agg": one set of aggregated workers, scaled as the decode component
    ttft_ms: float = 500.0
    itl_ms: float = 50.0
    isl: int = 3000
    osl: int = 150
    load_interval_s: float = 5.0
    throughput_interval_s: float = 180.0
    enable_load_scaling: bool = True
    enable_throughput_scaling: bool = True
    scale_down_sensitivity: float = 0.8
    min_endpoint: int = 1
    max_gpu_budget: int = 8
    prefill_engine_num_gpu: int = 1
    decode_engine_num_gpu: int = 1
    max_step: int = 1  # largest change of one component per decision
    down_stabilisation_ticks: int = 2  # consecutive ticks a load-based scale-down must be proposed on
    target_utilisation: float = 0.6  # the throughput floor plans engines this busy, leaving headroom for bursts
    predictor: str = "constant"
    load_min_observations: int = 5
    max_fpm_samples: int = 256
    max_num_batched_tokens: int = 8192
    time_scale: float = 1.0
    scaling_ack_timeout_s: float = 1800.0
    profile: str | None = None  # a timing table (fakes' format) as pre-deployment profile; None = live regression
    perf_profile: PerfProfile | None = None  # a throughput sweep (seed 003's interpolators): the throughput loop's capacity
    warmup_trace: str | None = None  # Mooncake JSONL of past arrivals the predictor starts from (predictors/warmup.py)

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise PlannerConfigError(f"predictor must be one of {', '.join(PREDICTORS)}, got {self.predictor!r}")
        if self.mode not in MODES:
            raise PlannerConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == AGG and (self.profile or self.perf_profile):
            raise PlannerConfigError(
                "mode 'agg' learns its 2-D perf model from live forward-pass metrics: drop profile/perf_profile, which "
                "describe separate prefill and decode engines"
            )
        if not 0.0 < self.scale_down_sensitivity <= 1.0:
            raise PlannerConfigError(f"scale_down_sensitivity is a fraction in (0, 1], got {self.scale_down_sensitivity}")
        if self.load_interval_s <= 0 or self.throughput_interval_s < self.load_interval_s:
            raise PlannerConfigError(
                f"need 0 < load_interval_s <= throughput_interval_s, got {self.load_interval_s} and {self.throughput_interval_s}"
            )
        if self.min_endpoint < 1 or self.max_step < 1 or self.down_stabilisation_ticks < 1:
            raise PlannerConfigError("min_endpoint, max_step and down_stabilisation_ticks must be >= 1")
        floor_gpus = self.prefill_min_endpoint * self.prefill_engine_num_gpu + self.min_endpoint * self.decode_engine_num_gpu
        if floor_gpus > self.max_gpu_budget:
            raise PlannerConfigError(
                f"min_endpoint={self.min_endpoint} of each component ({self.mode}) needs {floor_gpus} GPUs but max_gpu_budget is "
                f"{self.max_gpu_budget}: raise the budget or lower min_endpoint"
            )

    @property
    def prefill_min_endpoint(self) -> int:
        """The fewest prefill workers: none in aggregated mode (there is no prefill component)."""
        return 0 if self.mode == AGG else self.min_endpoint

    def real_seconds(self, simulated_s: float) -> float:
        """Simulated seconds as real seconds to sleep."""
        return simulated_s / self.time_scale if self.time_scale > 0 else simulated_s

    def simulated_seconds(self, real_s: float) -> float:
        return real_s * self.time_scale if self.time_scale > 0 else real_s

    @property
    def throughput_every(self) -> int:
        """Load ticks per throughput tick (the throughput interval rounded to whole load intervals)."""
        return max(1, round(self.throughput_interval_s / self.load_interval_s))
