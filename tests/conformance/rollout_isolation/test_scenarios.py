"""ROLLOUT-ISOLATION's scenarios build the DGDs they name, and tell a pod's version from its own container spec."""

from __future__ import annotations

import copy
from typing import Any

from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios


def worker_pod(component: dict[str, Any]) -> dict[str, Any]:
    """A pod as the operator makes it from a component: the component's args and env in its container."""
    container = {"image": component["image"], "args": component["args"], "env": component.get("env") or []}
    return {"metadata": {"name": component["name"]}, "spec": {"containers": [container]}}


def test_the_env_case_moves_the_block_size_from_args_to_env_and_changes_it_there() -> None:
    dgd = scenarios.ENV_BLOCK_SIZE.dgd()
    workers = [c for c in dgd["spec"]["components"] if c["type"] != "frontend"]
    assert all("--block-size" not in c["args"] for c in workers)
    assert all(c["env"] == [{"name": scenarios.BLOCK_SIZE_ENV, "value": "16"}] for c in workers)
    changed = copy.deepcopy(dgd)
    scenarios.ENV_BLOCK_SIZE.change(changed)
    new_workers = [c for c in changed["spec"]["components"] if c["type"] != "frontend"]
    assert [c["args"] for c in new_workers] == [c["args"] for c in workers], "only the env changes"
    assert not scenarios.ENV_BLOCK_SIZE.is_new(worker_pod(workers[0]))
    assert scenarios.ENV_BLOCK_SIZE.is_new(worker_pod(new_workers[0]))


def test_the_step_cases_deploy_their_targets_frontends_and_strategy() -> None:
    dgd = scenarios.STEP_CASES["seed-example"].dgd()
    replicas = {c["type"]: c["replicas"] for c in dgd["spec"]["components"]}
    assert replicas == {"frontend": 3, "prefill": 4, "decode": 2}
    assert dgd["spec"]["rolloutStrategy"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert scenarios.STEP_CASES["unavailable-1"].dgd()["spec"]["rolloutStrategy"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_the_split_scenario_is_one_aggregated_set_of_four_loading_for_a_while() -> None:
    dgd = scenarios.AGGREGATED_SPLIT.dgd()
    (worker,) = [c for c in dgd["spec"]["components"] if c["type"] != "frontend"]
    assert (worker["type"], worker["replicas"]) == ("worker", 4)
    assert worker["args"][-2:] == ["--role", "agg"] and "--startup-seconds" in worker["args"]
