"""``servecert planner serve``: its settings as flags, the errors it names, and the reference adapter's component for it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from servecert.adapters.contract import DeploymentSpec, PlannerSpec, WorkerSpec
from servecert.adapters.reference import planner as reference_planner
from servecert.protocol.perf_profile import PerfProfile
from servecert.reference_impl.planner import serve
from servecert.reference_impl.planner.config import PlannerConfig


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args(argv)


def test_without_the_operators_environment_it_exits_2_naming_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in serve.REQUIRED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DYN_NAMESPACE", "ns-dgd")
    assert serve.run(parse([])) == serve.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "DYN_PARENT_DGD_K8S_NAME, POD_NAMESPACE not set" in err and "the operator injects" in err


def test_a_bad_mix_of_settings_exits_2_with_the_configs_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in serve.REQUIRED_ENV:
        monkeypatch.setenv(name, "x")
    assert serve.run(parse(["--min-endpoint", "3", "--max-gpu-budget", "2"])) == serve.EXIT_CONFIG
    assert "raise the budget or lower min_endpoint" in capsys.readouterr().err


def test_the_reference_component_carries_every_setting_the_suite_asks_for() -> None:
    """The cluster path runs the same planner as the process one: its flags parse back into the same PlannerConfig."""
    planner = PlannerSpec(
        ttft_ms=700.0, itl_ms=40.0, isl=256, osl=32, load_interval_s=2.0, throughput_interval_s=6.0, min_endpoint=2,
        max_gpu_budget=14, prefill_engine_num_gpu=2, decode_engine_num_gpu=4, enable_throughput_scaling=False, predictor="kalman",
        profile=PerfProfile(256, 288, ((100.0, 200.0), (400.0, 900.0)), ((1000.0, 30.0), (4000.0, 120.0))),
    )  # fmt: skip
    spec = DeploymentSpec(model="m", workers=(WorkerSpec(role="prefill", max_num_batched_tokens=512),), time_scale=4.0, planner=planner)
    component = reference_planner.component(spec, hooks="tests.nonconforming.planner:SKIPS_MODEL_CHECK")
    assert component["image"] == "servecert/planner"
    args = parse(component["args"])
    wanted = dataclasses.replace(reference_planner.planner_config(planner, spec), namespace="dyn")
    assert serve.config_from(args, "dyn") == wanted
    assert args.hooks == "tests.nonconforming.planner:SKIPS_MODEL_CHECK"
    assert wanted != PlannerConfig(namespace="dyn") and wanted.perf_profile == planner.profile


def test_a_malformed_perf_profile_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse(["--perf-profile", '{"isl": 1}'])
