"""How the Dynamo adapter maps the suite's placement and policy onto Dynamo 1.6's worker variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecert.adapters.contract import AdapterError, DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.dynamo.adapter import FALLBACK_PREFERRED_WEIGHT, topology_plan, transfer_levels, warnings_in

PLACED = {"zone": "z0", "rack": "z0-r0", "host": "z0-r0-h0"}
MOUNT = Path("/mnt/topo")


def test_level_unset_keeps_topology_off_everywhere() -> None:
    for role in ("prefill", "decode", "agg"):
        plan = topology_plan(WorkerSpec(role=role, domains=PLACED), RouterSpec(topology_level=None))
        assert not plan.enabled and plan.env(MOUNT) == {}


def test_fail_is_required_on_prefill_workers() -> None:
    plan = topology_plan(WorkerSpec(role="prefill", domains=PLACED), RouterSpec(topology_level="rack", mismatch_policy="fail"))
    assert plan.files == PLACED
    assert plan.env(MOUNT) == {
        "DYN_TOPOLOGY_ENABLED": "true",
        "DYN_TOPOLOGY_MOUNT_PATH": str(MOUNT),
        "DYN_KV_TRANSFER_DOMAIN": "rack",
        "DYN_KV_TRANSFER_ENFORCEMENT": "required",
    }


def test_an_unset_policy_leaves_enforcement_to_dynamos_default() -> None:
    plan = topology_plan(WorkerSpec(role="prefill", domains=PLACED), RouterSpec(topology_level="rack"))
    env = plan.env(MOUNT)
    assert env["DYN_KV_TRANSFER_DOMAIN"] == "rack" and "DYN_KV_TRANSFER_ENFORCEMENT" not in env


def test_fallback_is_the_strongest_preferred_weight() -> None:
    plan = topology_plan(WorkerSpec(role="prefill", domains=PLACED), RouterSpec(topology_level="zone", mismatch_policy="fallback"))
    env = plan.env(MOUNT)
    assert env["DYN_KV_TRANSFER_ENFORCEMENT"] == "preferred"
    assert float(env["DYN_KV_TRANSFER_PREFERRED_WEIGHT"]) == FALLBACK_PREFERRED_WEIGHT


def test_decode_publishes_placement_and_a_worker_missing_the_level_names_one_it_has() -> None:
    router = RouterSpec(topology_level="host", mismatch_policy="fail")
    labelled = topology_plan(WorkerSpec(role="decode", domains=PLACED), router)
    assert labelled.transfer_domain == "host" and labelled.files == PLACED
    missing = {"zone": "z0", "rack": "z0-r0"}
    plan = topology_plan(WorkerSpec(role="decode", domains=missing), router)
    assert plan.files == missing and plan.transfer_domain in missing
    assert not topology_plan(WorkerSpec(role="decode", domains={}), router).enabled


def test_per_worker_spelling_is_kept() -> None:
    spec = WorkerSpec(role="prefill", domains=PLACED, transfer_enforcement="preferred", transfer_domain="zone", preferred_weight=0.85)
    env = topology_plan(spec, RouterSpec(topology_level=None)).env(MOUNT)
    assert env["DYN_KV_TRANSFER_DOMAIN"] == "zone"
    assert env["DYN_KV_TRANSFER_ENFORCEMENT"] == "preferred"
    assert float(env["DYN_KV_TRANSFER_PREFERRED_WEIGHT"]) == 0.85
    with pytest.raises(AdapterError, match="transfer_domain"):
        topology_plan(WorkerSpec(role="prefill", transfer_enforcement="required"), RouterSpec(topology_level=None))


def test_per_worker_policy_makes_the_other_workers_publish_their_placement() -> None:
    prefill = WorkerSpec(role="prefill", domains=PLACED, transfer_enforcement="preferred", transfer_domain="rack", preferred_weight=1.0)
    decode = WorkerSpec(role="decode", domains=PLACED)
    spec = DeploymentSpec(model="m", router=RouterSpec(topology_level=None), workers=(prefill, decode))
    assert transfer_levels(spec) == ("rack",)
    plan = topology_plan(decode, spec.router, transfer_levels(spec))
    assert plan.transfer_domain == "rack" and plan.files == PLACED
    assert not topology_plan(decode, spec.router, ()).enabled


def test_the_frontends_warnings_are_read_from_its_log() -> None:
    log = (
        "2026-11-25T05:00:00.1Z  INFO dynamo_llm::http: listening\n"
        "2026-11-25T05:00:01.2Z  WARN dynamo_llm::kv_router: no decode worker in zone=z0\n"
        "2026-11-25T05:00:02.3Z ERROR dynamo_runtime: lost worker 7\n"
    )
    assert [(r.level, r.message.split()[-1]) for r in warnings_in(log)] == [("WARNING", "zone=z0"), ("ERROR", "7")]
