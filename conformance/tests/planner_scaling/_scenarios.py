"""The PLANNER-SCALING scenarios as data: load shapes in simulated seconds and engines' worth.

Level 1.0 of a shape is ``peak_engines`` engines' worth of load (``ENGINE_RPS`` requests per
simulated second each), so ``STEP_X4`` goes from 0.8 to 3.2 engines' worth: one worker of each
component suffices before the step, four are needed after it. Durations are as short as the
checks allow (the whole profile must run in well under two minutes at the default time scale);
the moments the checks judge are named beside each scenario.
"""

from __future__ import annotations

from conformance.tests.planner_scaling._checks import Scenario
from fixtures.planner_calibration import ENGINE_RPS
from load.shapes.burst import Burst
from load.shapes.constant import Constant
from load.shapes.diurnal import Diurnal
from load.shapes.ramp import Ramp
from load.shapes.step import Step
from load.shapes.trace import TraceReplay, synthetic

STEP_AT = 14.0
STEP_X4 = Scenario("step-x4", Step(70.0, ((0.0, 0.25), (STEP_AT, 1.0))), peak_engines=3.2)

RISE_AT, FALL_AT = 10.0, 36.0
UP_AND_DOWN = Scenario("step-up-and-down", Step(72.0, ((0.0, 0.2), (RISE_AT, 1.0), (FALL_AT, 0.2))), peak_engines=3.0)

RAMP = Scenario("ramp", Ramp(56.0, ((0.0, 0.25), (28.0, 1.0))), peak_engines=3.2)

STEADY_SETTLED_AT = 22.0
STEADY = Scenario("steady", Constant(52.0), peak_engines=2.5)

OVER_BUDGET = Scenario("over-budget", Burst(32.0, base=0.25, start=4.0, length=28.0), peak_engines=4.0)

BURST = Scenario("burst", Burst(60.0, base=0.33, start=10.0, length=24.0), peak_engines=3.0)
DIURNAL = Scenario("diurnal", Diurnal(64.0, period_s=64.0, low=0.33, high=1.0), peak_engines=3.0)
TRACE = Scenario(
    "trace-replay",
    Constant(44.0),
    peak_engines=2.5,  # ISL 192-448 (mean ~320) at 1.5 engines' worth of request rate: ~2 engines' worth of work
    trace=TraceReplay(tuple(synthetic(66, rate_rps=1.5 * ENGINE_RPS, seed=3, block_tokens=64, sessions=6, system_blocks=2,
                                      turn_blocks=1, output_length=32))),
)
