"""The suite's CRDs: structural and named as servecert.protocol.kube_names says; on a cluster, the seeds' examples
apply verbatim and invalid variants are refused with a message naming the field.

Unit tests read ``servecert/harness/cluster/crds/*.yaml`` and ``servecert/harness/seed_examples``. Cluster tests
(marked ``cluster``) use the shared ``cluster`` fixture, whose ``up`` installed ``crds.suite_crds()``:
the examples go through ``kubectl apply --dry-run=server -f <file>`` unchanged, and each invalid
variant (an example with one field broken) through a server-side dry-run create, in a namespace
of this module's own. The ClusterTopology example is created for real first (and deleted at the
end, if this module created it), so the DGD example that names it stays valid once a validating
webhook looks the topology up.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.harness import seed_examples
from servecert.harness.cluster import binaries, crds
from servecert.harness.cluster.backends import Cluster
from servecert.protocol import kube_names as kn

KUBECTL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


DGD = Kind(kn.DGD_GROUP, kn.DGD_VERSION, kn.DGD_PLURAL, kn.DGD_KIND, namespaced=True)
ISVC = Kind(kn.IS_GROUP, kn.IS_VERSION, kn.IS_PLURAL, kn.IS_KIND, namespaced=True)
CT = Kind(kn.CT_GROUP, kn.CT_VERSION, kn.CT_PLURAL, kn.CT_KIND, namespaced=False)
KINDS = {k.kind: k for k in (DGD, ISVC, CT)}
CT_EXAMPLE = "clustertopology-my-cluster-topology"


def _crd(name: str) -> dict[str, Any]:
    by_name = {c["metadata"]["name"]: c for c in crds.suite_crds()}
    assert name in by_name, f"no CRD {name} in {crds.CRD_DIR}; found {sorted(by_name)}"
    return by_name[name]


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _nodes(schema: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node under ``schema`` with its path (``.a.b[]`` for items, ``.a{}`` for map values)."""
    yield where, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{where}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{where}{{}}")


def _structural_problems(where: str, node: dict[str, Any]) -> list[str]:
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    problems = []
    if "type" not in node and not preserve and node.get("x-kubernetes-int-or-string") is not True:
        problems.append(f"{where}: no type (and neither preserve-unknown-fields nor int-or-string)")
    if node.get("type") == "object" and not (preserve or "properties" in node or "additionalProperties" in node):
        problems.append(f"{where}: an object with no properties would have every field pruned")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties together are not structural")
    if node.get("type") == "array" and "items" not in node:
        problems.append(f"{where}: an array needs items")
    if node.get("x-kubernetes-list-type") == "map":
        missing = set(node.get("x-kubernetes-list-map-keys") or []) - set(node["items"].get("required") or [])
        if missing:
            problems.append(f"{where}: list-map keys {sorted(missing)} must be required in the items")
    return problems


# --- unit: the CRD files ---------------------------------------------------------------


def test_suite_crds_loads_every_yaml_file_in_the_folder() -> None:
    names = [c["metadata"]["name"] for c in crds.suite_crds()]
    assert names == [p.stem for p in crds.crd_files()]
    assert {k.crd_name for k in KINDS.values()} <= set(names)


@pytest.mark.parametrize("crd_name", sorted(k.crd_name for k in KINDS.values()))
def test_every_schema_node_is_structural(crd_name: str) -> None:
    crd = _crd(crd_name)
    problems = [p for where, node in _nodes(_schema(crd), "") for p in _structural_problems(where or ".", node)]
    assert not problems, f"{crd_name}: " + "; ".join(problems)


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
def test_crd_names_match_protocol_kube_names(kind: Kind) -> None:
    spec = _crd(kind.crd_name)["spec"]
    assert spec["group"] == kind.group
    assert spec["scope"] == ("Namespaced" if kind.namespaced else "Cluster")
    assert (spec["names"]["kind"], spec["names"]["plural"]) == (kind.kind, kind.plural)
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [(kind.version, True, True)]


def test_dgd_and_inference_service_have_a_status_subresource_and_fitting_short_names() -> None:
    for kind in (DGD, ISVC):
        assert _crd(kind.crd_name)["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert _crd(DGD.crd_name)["spec"]["names"]["shortNames"] == ["dgd"]
    assert "isvc" not in _crd(ISVC.crd_name)["spec"]["names"].get("shortNames", []), "isvc is KServe's on real clusters"


@pytest.mark.parametrize("crd_name", sorted(k.crd_name for k in KINDS.values()))
def test_every_cel_rule_has_a_message_that_names_its_field(crd_name: str) -> None:
    rules = [(where, v) for where, node in _nodes(_schema(_crd(crd_name)), "") for v in node.get("x-kubernetes-validations", [])]
    for where, validation in rules:
        field, _, reason = validation.get("message", "").partition(": ")
        assert field.startswith("spec.") and reason, f"{crd_name} {where}: message must read '<field path>: <reason>'"
    assert rules or crd_name == CT.crd_name


def test_a_crd_file_that_is_not_one_crd_named_like_the_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "widgets.example.io.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": crds.CRD_API_VERSION, "kind": "CustomResourceDefinition", "metadata": {"name": "x"}}))
    with pytest.raises(crds.CrdFileError, match="name the file"):
        crds.load_crd(bad)
    bad.write_text("kind: CustomResourceDefinition\n---\nkind: CustomResourceDefinition\n")
    with pytest.raises(crds.CrdFileError, match="exactly one YAML document"):
        crds.load_crd(bad)


# --- unit: the seed examples -----------------------------------------------------------


def test_seed_examples_are_all_there_and_of_the_suite_kinds() -> None:
    assert seed_examples.names() == [
        CT_EXAMPLE,
        "dgd-my-llm-disagg",
        "dgd-with-weight",
        "inferenceservice-story1",
        "inferenceservice-story2",
        "inferenceservice-story3",
        "inferenceservice-story4",
    ]
    for name in seed_examples.names():
        doc = seed_examples.load(name)
        kind = KINDS[doc["kind"]]
        assert doc["apiVersion"] == kind.api_version, name
    dgd = seed_examples.load("dgd-my-llm-disagg")
    assert dgd["spec"]["topologyConstraint"]["clusterTopologyName"] == seed_examples.load(CT_EXAMPLE)["metadata"]["name"]
    assert seed_examples.load("inferenceservice-story2.yaml")["spec"]["roles"][0]["template"]["spec"]["containers"][0]["args"][3] == (
        '{"kv_connector":"PyNcclConnector","kv_role":"kv_producer"}'
    )
    with pytest.raises(seed_examples.SeedExampleError, match="known: "):
        seed_examples.load("story5")


# --- cluster: fixtures -----------------------------------------------------------------


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Any]:
    api_client = cluster.api()
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def kubectl(cluster: Cluster) -> str:
    """The embedded cluster's own kubectl (same version as the apiserver), else one on PATH."""
    if cluster.state is not None:
        return str(binaries.ensure().kubectl)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip(f"backend {cluster.backend}: no kubectl on PATH")
    return found


@pytest.fixture(scope="module")
def namespace(api: Any) -> Iterator[str]:
    name = f"servecert-crds-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name, grace_period_seconds=0)


@pytest.fixture(scope="module")
def my_cluster_topology(api: Any, cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Seed 000's ClusterTopology, created for real (or found); on the embedded cluster it is never deleted.

    NB: under xdist each worker runs this module-scoped fixture, and the object is cluster-scoped
    with a fixed name: the worker that created it deleted it while the other still applied the DGD
    example against it (CI, stop 24: NotFound from kubectl apply). Not deleting it holds whichever
    worker runs which test (``xdist_group`` did not keep them together under pytest 9.2, now pinned
    lower in pyproject.toml; ``tests/conformance/suite/test_xdist_groups.py``). The embedded cluster
    is thrown away with the session.
    """
    body = seed_examples.load(CT_EXAMPLE)
    custom = client.CustomObjectsApi(api)
    created = True
    try:
        custom.create_cluster_custom_object(CT.group, CT.version, CT.plural, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        created = False
    yield body
    if created and cluster.backend != "embedded":
        custom.delete_cluster_custom_object(CT.group, CT.version, CT.plural, body["metadata"]["name"])


def _dry_run_create(api: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
    kind = KINDS[body["kind"]]
    custom = client.CustomObjectsApi(api)
    if kind.namespaced:
        result = custom.create_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, body, dry_run="All")
    else:
        result = custom.create_cluster_custom_object(kind.group, kind.version, kind.plural, body, dry_run="All")
    created: dict[str, Any] = result
    return created


def _refusal(api: Any, body: dict[str, Any], namespace: str) -> str:
    """The apiserver's message refusing ``body``; fails the test if it was accepted."""
    try:
        _dry_run_create(api, body, namespace)
    except ApiException as exc:
        assert exc.status == 422, f"expected 422 Invalid, got {exc.status}: {exc.body}"
        message: str = json.loads(exc.body)["message"]
        return message
    raise AssertionError(f"the apiserver accepted an invalid {body['kind']}: {json.dumps(body['spec'])}")


# --- cluster: the examples apply verbatim ----------------------------------------------


@pytest.mark.cluster
def test_the_suite_crds_are_installed_and_established(api: Any) -> None:
    ext = client.ApiextensionsV1Api(api)
    for crd in crds.suite_crds():
        stored = ext.read_custom_resource_definition(crd["metadata"]["name"])
        conditions = {c.type: c.status for c in stored.status.conditions or []}
        assert conditions.get("Established") == "True", f"{crd['metadata']['name']}: {conditions}"


@pytest.mark.cluster
@pytest.mark.parametrize("name", seed_examples.names())
def test_every_seed_example_applies_verbatim(
    name: str, kubectl: str, cluster: Cluster, namespace: str, my_cluster_topology: dict[str, Any]
) -> None:
    argv = [
        kubectl,
        f"--kubeconfig={cluster.kubeconfig}",
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        str(seed_examples.path(name)),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"kubectl apply of seed example {name} failed: {done.stderr.strip()}"
    doc = seed_examples.load(name)
    assert f"{doc['metadata']['name']} " in done.stdout and "(server dry run)" in done.stdout, done.stdout


@pytest.mark.cluster
def test_replicas_default_the_weight_is_kept_and_the_policy_is_left_to_the_implementation(
    api: Any, namespace: str, my_cluster_topology: dict[str, Any]
) -> None:
    """The schema defaults replicas; an omitted mismatchPolicy stays omitted, so the implementation's own default is judged."""
    body = seed_examples.load("dgd-with-weight")
    del body["spec"]["components"][0]["kvCacheTransferTopology"]["mismatchPolicy"]
    stored = _dry_run_create(api, body, namespace)
    frontend = stored["spec"]["components"][0]
    assert frontend["replicas"] == 1
    assert frontend["kvCacheTransferTopology"] == {"level": "zone", "kvTransferWeight": 50.0}


Mutation = Callable[[dict[str, Any]], None]


def _accepted_router(doc: dict[str, Any]) -> None:
    doc["spec"]["roles"].append(
        {"name": "router", "componentType": "router", "strategy": "prefix-cache", "httproute": {"parentRefs": [{"name": "gw"}]}}
    )
    doc["spec"]["roles"][-1]["endpointPickerConfig"] = "plugins: []\n"
    doc["spec"]["roles"][0]["strategy"] = ""


def _accepted_fallback(doc: dict[str, Any]) -> None:
    doc["spec"]["components"][0]["kvCacheTransferTopology"]["mismatchPolicy"] = "fallback"
    doc["spec"]["components"][1]["env"] = [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    doc["spec"]["rolloutStrategy"] = {"maxSurge": "25%", "maxUnavailable": 0, "paused": False}


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("example", "change"),
    [("inferenceservice-story2", _accepted_router), ("dgd-my-llm-disagg", _accepted_fallback)],
    ids=["router-fields-on-a-router", "fallback-env-valueFrom-rollout"],
)
def test_valid_variants_are_accepted_as_given(
    api: Any, namespace: str, my_cluster_topology: dict[str, Any], example: str, change: Mutation
) -> None:
    body = seed_examples.load(example)
    change(body)
    stored = _dry_run_create(api, body, namespace)
    assert stored["spec"] == body["spec"], "the apiserver pruned or changed fields the CRD should keep as given"


@pytest.mark.cluster
def test_the_crd_leaves_topology_on_a_worker_to_the_webhook(api: Any, namespace: str, my_cluster_topology: dict[str, Any]) -> None:
    # NB: seed 000 gives this refusal to the implementation's webhook (OperatorTopologyAdmission),
    # so the suite's CRD must let it through, or that test could not fail.
    body = seed_examples.load("dgd-my-llm-disagg")
    body["spec"]["components"][1]["kvCacheTransferTopology"] = {"level": "zone"}
    stored = _dry_run_create(api, body, namespace)
    assert stored["spec"]["components"][1]["kvCacheTransferTopology"]["level"] == "zone"


# --- cluster: invalid variants are refused, naming the field ----------------------------


def _set(path: str, value: Any) -> Mutation:
    """A mutation setting the dotted ``path`` (list indices as numbers) to ``value``; None deletes it."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for key in parents:
            target = target[int(key)] if key.isdigit() else target.setdefault(key, {})
        if value is None:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = copy.deepcopy(value)

    return change


INVALID: list[tuple[str, str, Mutation, list[str]]] = [
    (
        "mismatchPolicy-not-in-enum",
        "dgd-my-llm-disagg",
        _set("spec.components.0.kvCacheTransferTopology.mismatchPolicy", "sometimes"),
        ["spec.components[0].kvCacheTransferTopology.mismatchPolicy", "Unsupported value", '"fail"', '"fallback"'],
    ),
    (
        "transfer-topology-without-clusterTopologyName",
        "dgd-my-llm-disagg",
        _set("spec.topologyConstraint", None),
        ["spec.topologyConstraint.clusterTopologyName: required when spec.components[].kvCacheTransferTopology is set"],
    ),
    (
        "duplicate-component-names",
        "dgd-my-llm-disagg",
        _set("spec.components.2.name", "prefill-worker"),
        ["spec.components[2]", "Duplicate value"],
    ),
    (
        "component-type-not-in-enum",
        "dgd-my-llm-disagg",
        _set("spec.components.1.type", "encode"),
        ["spec.components[1].type", "Unsupported value"],
    ),
    (
        "dgd-replicas-negative",
        "dgd-my-llm-disagg",
        _set("spec.components.1.replicas", -1),
        ["spec.components[1].replicas", "greater than or equal to 0"],
    ),
    (
        "kvTransferWeight-negative",
        "dgd-with-weight",
        _set("spec.components.0.kvCacheTransferTopology.kvTransferWeight", -1.5),
        ["spec.components[0].kvCacheTransferTopology.kvTransferWeight", "greater than or equal to 0"],
    ),
    (
        "level-empty",
        "dgd-my-llm-disagg",
        _set("spec.components.0.kvCacheTransferTopology.level", ""),
        ["spec.components[0].kvCacheTransferTopology.level"],
    ),
    (
        "component-name-not-a-dns-label",
        "dgd-my-llm-disagg",
        _set("spec.components.1.name", "Prefill_Worker"),
        ["spec.components[1].name"],
    ),
    (
        "duplicate-role-names",
        "inferenceservice-story2",
        _set("spec.roles.1.name", "prefill"),
        ["spec.roles[1]", "Duplicate value"],
    ),
    (
        "componentType-not-in-enum",
        "inferenceservice-story1",
        _set("spec.roles.0.componentType", "gateway"),
        ["spec.roles[0].componentType", "Unsupported value", '"router"', '"prefiller"', '"decoder"', '"worker"'],
    ),
    (
        "strategy-on-a-worker-role",
        "inferenceservice-story1",
        _set("spec.roles.0.strategy", "prefix-cache"),
        ["spec.roles[0].strategy", "spec.roles[].strategy: only valid on roles with componentType router"],
    ),
    (
        "httproute-on-a-prefiller-role",
        "inferenceservice-story2",
        _set("spec.roles.0.httproute", {"parentRefs": [{"name": "gw"}]}),
        ["spec.roles[0].httproute", "spec.roles[].httproute: only valid on roles with componentType router"],
    ),
    (
        "endpointPickerConfig-on-a-decoder-role",
        "inferenceservice-story2",
        _set("spec.roles.1.endpointPickerConfig", "plugins: []"),
        ["spec.roles[1].endpointPickerConfig", "spec.roles[].endpointPickerConfig: only valid on roles with componentType router"],
    ),
    (
        "nodeCount-zero",
        "inferenceservice-story3",
        _set("spec.roles.0.multinode.nodeCount", 0),
        ["spec.roles[0].multinode.nodeCount", "greater than or equal to 1"],
    ),
    (
        "multinode-without-nodeCount",
        "inferenceservice-story3",
        _set("spec.roles.0.multinode.nodeCount", None),
        ["spec.roles[0].multinode.nodeCount", "Required value"],
    ),
    (
        "role-replicas-negative",
        "inferenceservice-story1",
        _set("spec.roles.0.replicas", -1),
        ["spec.roles[0].replicas", "greater than or equal to 0"],
    ),
    (
        "no-roles",
        "inferenceservice-story1",
        _set("spec.roles", []),
        ["spec.roles", "at least 1 items"],
    ),
    (
        "duplicate-topology-domains",
        CT_EXAMPLE,
        _set("spec.levels.2.domain", "zone"),
        ["spec.levels[2]", "Duplicate value"],
    ),
    (
        "no-topology-levels",
        CT_EXAMPLE,
        _set("spec.levels", []),
        ["spec.levels", "at least 1 items"],
    ),
]


@pytest.mark.cluster
@pytest.mark.parametrize(("example", "change", "expected"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_variants_are_refused_naming_the_field(
    api: Any, namespace: str, my_cluster_topology: dict[str, Any], example: str, change: Mutation, expected: list[str]
) -> None:
    body = seed_examples.load(example)
    change(body)
    message = _refusal(api, body, namespace)
    missing = [text for text in expected if text not in message]
    assert not missing, f"refusal of {example} lacks {missing}: {message}"


@pytest.mark.cluster
def test_inference_service_status_is_validated_through_the_status_subresource(api: Any, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    body = seed_examples.load("inferenceservice-story1")
    name = body["metadata"]["name"]
    custom.create_namespaced_custom_object(ISVC.group, ISVC.version, namespace, ISVC.plural, body)
    try:
        component = {"desiredReplicas": 1, "readyReplicas": 0, "nodesPerReplica": 1, "totalPods": 1, "readyPods": 0, "phase": "Pending"}
        status = {"observedGeneration": 1, "components": {"inference": component}, "conditions": [{"type": "Ready", "status": "False"}]}
        patched = custom.patch_namespaced_custom_object_status(ISVC.group, ISVC.version, namespace, ISVC.plural, name, {"status": status})
        assert patched["status"]["components"]["inference"]["phase"] == "Pending"
        bad = {"status": {"components": {"inference": {**component, "phase": "Sleeping"}}}}
        with pytest.raises(ApiException) as refused:
            custom.patch_namespaced_custom_object_status(ISVC.group, ISVC.version, namespace, ISVC.plural, name, bad)
        assert "status.components.inference.phase" in json.loads(refused.value.body)["message"]
    finally:
        custom.delete_namespaced_custom_object(ISVC.group, ISVC.version, namespace, ISVC.plural, name)
