"""The Dynamo planner adapter's mapping of the suite's PlannerSpec onto Dynamo 1.6.1's planner config.

The suite's planner figures are simulated; Dynamo's planner reads real milliseconds and whole real
seconds (its intervals are ``int``): the SLA divides by the time scale, and an interval that is not
a whole number of real seconds is refused with the time scale to choose.
"""

from __future__ import annotations

import pytest

from servecert.adapters.contract import AGG, AdapterError, DeploymentSpec, PlannerSpec
from servecert.adapters.dynamo import planner as dynamo_planner

PLANNER = PlannerSpec(ttft_ms=1000.0, itl_ms=100.0, load_interval_s=2.0, throughput_interval_s=6.0, min_endpoint=2,
                      max_gpu_budget=10, prefill_engine_num_gpu=2, decode_engine_num_gpu=4)


def spec(time_scale: float, planner: PlannerSpec = PLANNER) -> DeploymentSpec:
    return DeploymentSpec(model="m", namespace="ns", time_scale=time_scale, planner=planner)


def test_the_sla_and_the_intervals_are_real_time_and_every_bound_is_passed_on() -> None:
    config = dynamo_planner.planner_config(spec(2.0), PLANNER, 9100)
    assert (config["ttft_ms"], config["itl_ms"]) == (500.0, 50.0)
    assert (config["load_adjustment_interval_seconds"], config["throughput_adjustment_interval_seconds"]) == (1, 3)
    assert (config["min_endpoint"], config["max_gpu_budget"]) == (2, 10)
    assert (config["prefill_engine_num_gpu"], config["decode_engine_num_gpu"]) == (2, 4)
    assert (config["environment"], config["namespace"], config["model_name"], config["mode"]) == ("virtual", "ns", "m", "disagg")
    assert config["enable_throughput_scaling"] is False  # NB: it reads a Prometheus server, which is not here
    aggregated = PlannerSpec(mode=AGG, load_interval_s=2.0, throughput_interval_s=6.0)
    assert dynamo_planner.planner_config(spec(2.0), aggregated, 1)["mode"] == "agg"


@pytest.mark.parametrize("time_scale", [4.0, 3.0, 0.5 / 0.3])
def test_an_interval_that_is_not_whole_real_seconds_is_refused_naming_the_time_scale(time_scale: float) -> None:
    with pytest.raises(AdapterError, match="planner_time_scale=2"):
        dynamo_planner.planner_config(spec(time_scale), PLANNER, 9100)
