"""Seed 000: the operator configures frontends and workers from kvCacheTransferTopology, and nothing without it."""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects

WORKERS = ("prefill", "decode")


async def check(ctx: TestContext) -> None:
    env, level = kc.env_of(ctx), ctx.params["level"]
    await kc.create(env, kc.DGD, manifests.dgd("topo", level=level, policy=ctx.params.get("policy", "fail")))
    selector = f"{kn.DGD_NAME_LABEL}=topo"

    async def all_pods() -> list[kube_objects.Pod]:
        found = await kc.pods(env, selector)
        return found if len(found) == 4 else []

    found = await kc.wait_for(all_pods, ctx.timeouts.operator_reconcile_s, "the DGD's 4 pods (frontend, prefill, 2 decode)")
    by_type = {t: [p for p in found if p["metadata"]["labels"].get(kn.COMPONENT_TYPE_LABEL) == t] for t in ("frontend", *WORKERS)}
    if any(not pods for pods in by_type.values()):
        raise AssertionError(f"pods per component type: { {t: len(p) for t, p in by_type.items()} } (label {kn.COMPONENT_TYPE_LABEL})")
    for pod in found:
        if kc.env_value(pod, kn.ENV_DYN_NAMESPACE) in (None, ""):
            raise AssertionError(f"pod {pod['metadata']['name']} has no {kn.ENV_DYN_NAMESPACE}")
    if level is None:
        _nothing_injected(found)
        return
    levels = [domain for domain, _key in await kc.cluster_topology_levels(env, manifests.CLUSTER_TOPOLOGY)]
    for pod in by_type["frontend"]:
        _env_must_be(pod, {kn.ENV_TRANSFER_LEVEL: level, kn.ENV_MISMATCH_POLICY: ctx.params.get("policy", "fail")})
        _volume_must_be_absent(pod)
    for pod in by_type["prefill"] + by_type["decode"]:
        _env_must_be(pod, {kn.ENV_TOPOLOGY_ENABLED: "true"})
        _topology_volume_must_project(pod, levels)


def _env_must_be(pod: kube_objects.Pod, expected: dict[str, str]) -> None:
    for name, value in expected.items():
        actual = kc.env_value(pod, name)
        if actual != value:
            raise AssertionError(f"pod {pod['metadata']['name']}: env {name}={actual!r}, expected {value!r}")


def _volume_must_be_absent(pod: kube_objects.Pod) -> None:
    mounts = [m for c in pod["spec"]["containers"] for m in c.get("volumeMounts") or [] if m.get("mountPath") == kn.TOPOLOGY_MOUNT_PATH]
    if mounts:
        raise AssertionError(f"pod {pod['metadata']['name']} mounts {kn.TOPOLOGY_MOUNT_PATH} but must not")


def _topology_volume_must_project(pod: kube_objects.Pod, levels: list[str]) -> None:
    name = pod["metadata"]["name"]
    mounts = {
        m["name"] for c in pod["spec"]["containers"] for m in c.get("volumeMounts") or [] if m.get("mountPath") == kn.TOPOLOGY_MOUNT_PATH
    }
    volumes = [v for v in pod["spec"].get("volumes") or [] if v["name"] in mounts and "downwardAPI" in v]
    if not volumes:
        raise AssertionError(f"pod {name}: no Downward API volume mounted at {kn.TOPOLOGY_MOUNT_PATH}")
    items = {i["path"]: i.get("fieldRef", {}).get("fieldPath") for i in volumes[0]["downwardAPI"].get("items") or []}
    wanted = {level: f"metadata.labels['{kn.TOPOLOGY_LABEL_PREFIX}{level}']" for level in levels}
    if items != wanted:
        raise AssertionError(f"pod {name}: topology volume projects {items}; expected one file per ClusterTopology level {wanted}")


def _nothing_injected(found: list[kube_objects.Pod]) -> None:
    for pod in found:
        for name in (kn.ENV_TRANSFER_LEVEL, kn.ENV_MISMATCH_POLICY, kn.ENV_TOPOLOGY_ENABLED):
            if kc.env_value(pod, name) is not None:
                raise AssertionError(f"pod {pod['metadata']['name']} has {name} without kvCacheTransferTopology (backward compatibility)")
        _volume_must_be_absent(pod)


TEST = ConformanceTest(
    short_name="OperatorTopologyEnvAndVolume",
    description="Frontends get the router's level and mismatch policy, workers DYN_TOPOLOGY_ENABLED and one projected file "
    "per level; without kvCacheTransferTopology neither.",
    features=(features.OPERATOR_TOPOLOGY_INJECTION,),
    seed=SeedRef(
        "000",
        "Phase 4 — Grove + Operator Integration",
        "Operator adds EnsureTopologyVolume(): generates Downward API volume projecting one file per topology level "
        "under /etc/podinfo/topology/",
        note="Also the frontend's level and policy env vars (section 4), DYN_TOPOLOGY_ENABLED=true on workers (section 2), "
        "and none of it without kvCacheTransferTopology (Backward Compatibility).",
    ),
    environments=frozenset({"cluster"}),
    cases=(
        Case("rack-fail", {"level": "rack"}),
        Case("zone-fallback", {"level": "zone", "policy": "fallback"}),
        Case("host-fail", {"level": "host"}),
        Case("unset", {"level": None}),
    ),
    check=check,
)
