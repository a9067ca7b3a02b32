"""A DeploymentSpec as nodes and a DGD, without a cluster: labels, pinning, engine arguments, the policy left unset, logs."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from servecert.adapters.contract import PD_SGLANG, PREFERRED, AdapterError, DeploymentSpec, EnginePod, LogRecord, RouterSpec, WorkerSpec
from servecert.fakes import serve
from servecert.harness import cluster_deploy as cd
from servecert.harness.cluster import topology

LEVELS = list(topology.LEVELS)
PLACED = {"zone": "z0", "rack": "z0-r1", "host": "z0-r1-h1"}


def parsed(args: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args(args)


def spec(*workers: WorkerSpec, level: str | None = "rack", policy: str | None = "fail") -> DeploymentSpec:
    return DeploymentSpec(model="m", router=RouterSpec(topology_level=level, mismatch_policy=policy), workers=workers, time_scale=2.0)


def test_a_workers_node_carries_its_domains_under_the_cluster_topologys_keys_and_is_reserved() -> None:
    node = cd.worker_node("n0", PLACED, LEVELS)
    labels = node["metadata"]["labels"]
    assert {k: labels[k] for k in (topology.ZONE_LABEL, topology.RACK_LABEL, topology.HOST_LABEL)} == {
        topology.ZONE_LABEL: "z0",
        topology.RACK_LABEL: "z0-r1",
        topology.HOST_LABEL: "z0-r1-h1",
    }
    assert node["spec"]["taints"] == [{"key": topology.ISOLATION_KEY, "value": "n0", "effect": "NoSchedule"}]
    assert topology.GPU_RESOURCE not in node["status"]["capacity"]  # NB: no GPU workload of another test lands here


@pytest.mark.parametrize("missing", ["zone", "rack", "host"])
def test_a_level_the_worker_lacks_is_absent_from_its_node(missing: str) -> None:
    domains = {k: v for k, v in PLACED.items() if k != missing}
    labels = cd.worker_node("n0", domains, LEVELS)["metadata"]["labels"]
    key = dict(LEVELS)[missing]
    assert key not in labels


def test_each_worker_is_its_own_component_pinned_to_its_own_node() -> None:
    workers = (WorkerSpec("prefill", domains=PLACED), WorkerSpec("decode", name="Far Away!", domains=PLACED))
    placed = [cd.Placed(w, cd.component_name(i, w), f"node-{i}") for i, w in enumerate(workers)]
    body = cd.dgd_for(spec(*workers), placed)
    frontend, prefill, decode = body["spec"]["components"]
    assert (prefill["name"], decode["name"]) == ("prefill-0", "decode-1-far-away")
    assert (prefill["type"], decode["type"], prefill["replicas"]) == ("prefill", "decode", 1)
    assert prefill["extraPodSpec"]["nodeSelector"] == {topology.ISOLATION_KEY: "node-0"}
    assert decode["extraPodSpec"]["tolerations"][0]["value"] == "node-1"
    assert frontend["kvCacheTransferTopology"] == {"level": "rack", "mismatchPolicy": "fail"}
    assert body["spec"]["topologyConstraint"] == {"clusterTopologyName": cd.CLUSTER_TOPOLOGY}


def test_an_unset_policy_is_left_out_so_the_implementation_defaults_it() -> None:
    body = cd.dgd_for(spec(policy=None), [])
    assert body["spec"]["components"][0]["kvCacheTransferTopology"] == {"level": "rack"}


def test_an_unset_level_writes_no_topology_at_all() -> None:
    body = cd.dgd_for(spec(level=None), [])
    assert "kvCacheTransferTopology" not in body["spec"]["components"][0]
    assert "topologyConstraint" not in body["spec"]


def test_engine_arguments_parse_and_carry_the_workers_parameters() -> None:
    worker = WorkerSpec("decode", domains=PLACED, block_size=32, tensor_parallel_size=2, engine_version="2", startup_seconds=4.0)
    args = parsed(cd.engine_args(worker, spec(worker), "decode-0"))
    carried = (args.role, args.engine_id, args.block_size, args.tensor_parallel_size, args.engine_version)
    assert carried == ("decode", "decode-0", 32, 2, "2")
    assert (args.time_scale, args.startup_seconds, args.topology) == (2.0, 2.0, None)  # NB: its domains come from its node


def test_a_worker_lacking_the_level_names_its_other_domains_itself() -> None:
    worker = WorkerSpec("decode", domains={"zone": "z0", "host": "h0"})
    args = parsed(cd.engine_args(worker, spec(worker), "decode-0"))
    assert args.topology == "zone=z0,host=h0"


def test_dynamos_per_worker_policy_is_refused_with_the_way_out() -> None:
    worker = WorkerSpec("prefill", domains=PLACED, transfer_enforcement=PREFERRED, transfer_domain="rack")
    with pytest.raises(AdapterError, match="--env process"):
        cd.engine_args(worker, spec(worker), "prefill-0")


def test_log_lines_at_warning_or_above_become_records_by_their_first_level_name() -> None:
    text = "\n".join(
        [
            "2026-11-25 10:00:00,000 INFO servecert.reference_impl.frontend: got an ERROR from nobody",
            "2026-11-25 10:00:01,000 WARNING servecert.reference_impl.frontend.router: fallback across rack boundary",
            "2026-11-25 10:00:02,000 ERROR x: broken",
            "level=WARN msg=late",
            "no level here",
        ]
    )
    assert cd.parse_log(text) == [
        LogRecord("WARNING", "servecert.reference_impl.frontend.router: fallback across rack boundary"),
        LogRecord("ERROR", "x: broken"),
        LogRecord("WARNING", "msg=late"),
    ]


def test_a_standby_worker_is_declared_at_zero_replicas_so_a_join_changes_no_template() -> None:
    worker = WorkerSpec("decode", domains=PLACED)
    standing, joined = cd.Placed(worker, "decode-0", "n0", replicas=0), cd.Placed(worker, "decode-0", "n0", replicas=1)
    before, after = (cd.dgd_for(spec(worker), [p], "router-0")["spec"]["components"][1] for p in (standing, joined))
    assert (before["replicas"], after["replicas"]) == (0, 1)
    assert {k: v for k, v in before.items() if k != "replicas"} == {k: v for k, v in after.items() if k != "replicas"}


def test_with_no_level_an_engine_still_names_where_it_sits() -> None:
    worker = WorkerSpec("decode", domains=PLACED)
    args = parsed(cd.engine_args(worker, spec(worker, level=None), "decode-0"))
    assert args.topology == "zone=z0,rack=z0-r1,host=z0-r1-h1"


def test_an_engine_pod_an_adapter_places_runs_the_fake_engine_as_asked_on_its_own_node() -> None:
    worker = WorkerSpec("prefill", name="p", domains=PLACED, block_size=64)
    asked = EnginePod(
        "pd-3-prefill-0", worker, spec(worker), 8123, PD_SGLANG, {"role": "prefill"}, {"sglang.ai/bootstrap-port": "8123"}, grace_s=7.0
    )
    pod = cd.engine_pod(asked, "node-9")
    (container,) = pod["spec"]["containers"]
    args = parsed(container["args"])
    assert (args.port, args.pd_protocol, args.engine_id, args.role, args.block_size) == (8123, PD_SGLANG, "pd-3-prefill-0", "prefill", 64)
    assert container["image"] == cd.ENGINE_IMAGE and container["ports"] == [{"containerPort": 8123}]
    assert pod["metadata"] == {"name": "pd-3-prefill-0", "labels": {"role": "prefill"}, "annotations": {"sglang.ai/bootstrap-port": "8123"}}
    assert pod["spec"]["nodeSelector"] == {topology.ISOLATION_KEY: "node-9"}
    assert pod["spec"]["terminationGracePeriodSeconds"] == 7
    assert "--pd-protocol" not in cd.engine_pod(dataclasses.replace(asked, pd_protocol=None), "node-9")["spec"]["containers"][0]["args"]
