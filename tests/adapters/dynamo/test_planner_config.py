"""The Dynamo planner adapter's mapping of the suite's PlannerSpec onto Dynamo 1.6.1's planner config.

The suite's planner figures are simulated; Dynamo's planner reads real milliseconds and whole real
seconds (its intervals are ``int``): the SLA divides by the time scale, and an interval that is not
a whole number of real seconds is refused with the time scale to choose. Every setting the spec
carries that Dynamo has is passed on (a forgotten one made its verdicts the adapter's, not its own):
the loops' switches, the predictor, the sensitivity in percent, the Prometheus it reads, and the
acknowledgement timeout, which Dynamo reads only from its environment.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from servecert.adapters.contract import AGG, KALMAN, AdapterError, DeploymentSpec, PlannerSpec
from servecert.adapters.dynamo import planner as dynamo_planner

PLANNER = PlannerSpec(ttft_ms=1000.0, itl_ms=100.0, load_interval_s=2.0, throughput_interval_s=6.0, min_endpoint=2,
                      max_gpu_budget=10, prefill_engine_num_gpu=2, decode_engine_num_gpu=4, scale_down_sensitivity=0.55,
                      predictor=KALMAN, enable_throughput_scaling=True, scaling_ack_timeout_s=7.0)
PROMETHEUS = "http://127.0.0.1:9091"


def spec(time_scale: float, planner: PlannerSpec = PLANNER) -> DeploymentSpec:
    return DeploymentSpec(model="m", namespace="ns", time_scale=time_scale, planner=planner)


def test_the_sla_and_the_intervals_are_real_time_and_every_bound_is_passed_on() -> None:
    config = dynamo_planner.planner_config(spec(2.0), PLANNER, 9100, PROMETHEUS)
    assert (config["ttft_ms"], config["itl_ms"]) == (500.0, 50.0)
    assert (config["load_adjustment_interval_seconds"], config["throughput_adjustment_interval_seconds"]) == (1, 3)
    assert (config["min_endpoint"], config["max_gpu_budget"]) == (2, 10)
    assert (config["prefill_engine_num_gpu"], config["decode_engine_num_gpu"]) == (2, 4)
    assert (config["environment"], config["namespace"], config["model_name"], config["mode"]) == ("virtual", "ns", "m", "disagg")
    assert (config["enable_throughput_scaling"], config["enable_load_scaling"]) == (True, True)
    assert (config["metric_pulling_prometheus_endpoint"], config["throughput_metrics_source"]) == (PROMETHEUS, "frontend")
    assert (config["load_predictor"], config["load_scaling_down_sensitivity"]) == ("kalman", 55)
    load_only = replace(PLANNER, enable_throughput_scaling=False)
    assert dynamo_planner.planner_config(spec(2.0), load_only, 1, PROMETHEUS)["enable_throughput_scaling"] is False
    aggregated = PlannerSpec(mode=AGG, load_interval_s=2.0, throughput_interval_s=6.0)
    assert dynamo_planner.planner_config(spec(2.0), aggregated, 1, PROMETHEUS)["mode"] == "agg"


def test_the_acknowledgement_timeout_reaches_the_virtual_connector_rounded_up_to_whole_seconds() -> None:
    # 7 simulated s at scale 2 is 3.5 s: 4, never 3, so it cannot decide again before the suite allows
    assert dynamo_planner.connector_env(spec(2.0), PLANNER) == {"SCALING_MAX_WAIT_TIME": "4", "SCALING_CHECK_INTERVAL": "1"}
    assert dynamo_planner.connector_env(spec(1.0), replace(PLANNER, scaling_ack_timeout_s=6.0))["SCALING_MAX_WAIT_TIME"] == "6"


def test_a_predictor_dynamo_lacks_is_refused_naming_the_ones_it_has() -> None:
    with pytest.raises(AdapterError, match="kalman"):
        dynamo_planner.planner_config(spec(2.0), replace(PLANNER, predictor="holt-winters"), 1, PROMETHEUS)


@pytest.mark.parametrize("time_scale", [4.0, 3.0, 0.5 / 0.3])
def test_an_interval_that_is_not_whole_real_seconds_is_refused_naming_the_time_scale(time_scale: float) -> None:
    with pytest.raises(AdapterError, match="planner_time_scale=2"):
        dynamo_planner.planner_config(spec(time_scale), PLANNER, 9100, PROMETHEUS)
