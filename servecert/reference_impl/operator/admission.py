"""Admission rules that need a lookup (seed 000's table) plus InferenceService checks, as pure functions.

The CRD schemas and CEL rules (``servecert/harness/cluster/crds``) refuse what can be decided from the
object alone; this module repeats those checks (a webhook must not depend on the schema having
been installed as shipped) and adds the ones that need the cluster: whether the ClusterTopology
CRD exists, whether the named ClusterTopology exists, whether ``level`` is one of its domains.
Each error names the field and the reason, and what to do.

``TopologyLookup`` is what the webhook handler passes in (backed by the API); tests pass a dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from servecert.protocol.kube_objects import DGDComponent, DGDSpec, DynamoGraphDeployment, InferenceService, KvCacheTransferTopology, Role
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour

FRONTEND = "frontend"
COMPONENT_TYPES = ("frontend", "prefill", "decode", "worker", "planner")
ROLE_TYPES = ("router", "prefiller", "decoder", "worker")
ROUTER_ONLY = ("strategy", "httproute", "endpointPickerConfig")


class TopologyLookup(Protocol):
    def crd_installed(self) -> bool: ...

    def domains(self, name: str) -> list[str] | None:
        """The domains of ClusterTopology ``name``, or None when it does not exist."""
        ...


def dgd_errors(dgd: DynamoGraphDeployment, lookup: TopologyLookup, behaviour: Behaviour = REFERENCE) -> list[str]:
    spec = dgd.get("spec") or {}
    components: Sequence[DGDComponent] = spec.get("components") or []
    errors: list[str] = []
    with_topology: list[tuple[int, KvCacheTransferTopology]] = []
    for index, component in enumerate(components):
        ctype = component.get("type")
        field = f"spec.components[{index}]"
        if ctype not in COMPONENT_TYPES:
            errors.append(f"{field}.type: {ctype!r} is not one of {', '.join(COMPONENT_TYPES)}")
        topology = component.get("kvCacheTransferTopology")
        if topology is not None:
            if ctype != FRONTEND and ctype in behaviour.topology_refused_on:
                errors.append(
                    f"{field}.kvCacheTransferTopology: only valid on components of type frontend, not {ctype!r}; "
                    "move it to the frontend component"
                )
            elif ctype == FRONTEND:
                with_topology.append((index, topology))
    if with_topology:
        errors += _topology_errors(spec, with_topology, lookup, behaviour)
    return errors


def _topology_errors(
    spec: DGDSpec, entries: list[tuple[int, KvCacheTransferTopology]], lookup: TopologyLookup, behaviour: Behaviour
) -> list[str]:
    name = (spec.get("topologyConstraint") or {}).get("clusterTopologyName")
    first = f"spec.components[{entries[0][0]}].kvCacheTransferTopology"
    if not name:
        return [f"spec.topologyConstraint.clusterTopologyName: required when {first} is set; name the ClusterTopology to resolve its level"]
    if not lookup.crd_installed():
        if all(topo.get("mismatchPolicy", "fail") not in behaviour.crd_required_for for _, topo in entries):
            return []
        return [
            f"{first}: the ClusterTopology CRD (clustertopologies.grove.io) is not installed, so ClusterTopology "
            f"{name!r} cannot be read; install Grove's ClusterTopology or remove kvCacheTransferTopology"
        ]
    domains = lookup.domains(name)
    if domains is None and not behaviour.check_topology_exists:
        return []
    if domains is None:
        return [f"spec.topologyConstraint.clusterTopologyName: ClusterTopology {name!r} not found; create it or correct the name"]
    errors = []
    for index, topo in entries:
        level = topo.get("level")
        if behaviour.check_level and level not in domains:
            errors.append(
                f"spec.components[{index}].kvCacheTransferTopology.level: {level!r} is not a domain of ClusterTopology "
                f"{name!r} (its domains: {', '.join(domains)})"
            )
        policy = topo.get("mismatchPolicy", "fail")
        if policy not in ("fail", "fallback"):
            errors.append(f"spec.components[{index}].kvCacheTransferTopology.mismatchPolicy: {policy!r} is not fail or fallback")
    return errors


def inference_service_errors(isvc: InferenceService) -> list[str]:
    roles: Sequence[Role] = (isvc.get("spec") or {}).get("roles") or []
    errors: list[str] = []
    if not roles:
        errors.append("spec.roles: at least one role is required")
    seen: set[str] = set()
    for index, role in enumerate(roles):
        field = f"spec.roles[{index}]"
        name, ctype = role.get("name"), role.get("componentType")
        if name in seen:
            errors.append(f"{field}.name: {name!r} is used by an earlier role; role names must be unique")
        seen.add(str(name))
        if ctype not in ROLE_TYPES:
            errors.append(f"{field}.componentType: {ctype!r} is not one of {', '.join(ROLE_TYPES)}")
        for key in ROUTER_ONLY:
            if role.get(key) not in (None, "", {}) and ctype != "router":
                errors.append(f"{field}.{key}: only valid on roles with componentType router, not {ctype!r}")
        replicas = role.get("replicas")
        if replicas is not None and int(replicas) < 0:
            errors.append(f"{field}.replicas: {replicas} must be >= 0")
        multinode = role.get("multinode")
        if multinode is not None and "nodeCount" not in multinode:
            errors.append(f"{field}.multinode.nodeCount: required when multinode is set (the number of nodes per replica, >= 1)")
        elif multinode is not None and int(multinode["nodeCount"]) < 1:
            errors.append(f"{field}.multinode.nodeCount: {multinode['nodeCount']} must be >= 1")
    return errors
