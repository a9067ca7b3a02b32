"""Topology injection (the role seed 000 gives Grove): node labels -> ``grove.io/topology.*`` pod labels.

Data flow: a pod of a DGD worker carries the annotation ``CLUSTER_TOPOLOGY_ANNOTATION`` naming its
ClusterTopology. Once the scheduler binds it (``spec.nodeName``), the operator reads that node's
labels, resolves each level's ``labelKey`` through the ClusterTopology, and patches one label per
level found. The operator projects those labels into files with a Downward API volume, so the
worker reads them at start-up; the labels are only ever written after binding, from the bound
node, which is what makes the files true.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servecert.protocol.kube_names import TOPOLOGY_LABEL_PREFIX
from servecert.protocol.kube_objects import ClusterTopology, Pod

CLUSTER_TOPOLOGY_ANNOTATION = "servecert.io/cluster-topology"


@dataclass(frozen=True)
class Level:
    domain: str
    label_key: str


def levels_of(cluster_topology: ClusterTopology) -> list[Level]:
    """The ordered levels of a ClusterTopology object (broadest first)."""
    raw = (cluster_topology.get("spec") or {}).get("levels") or []
    return [Level(str(item["domain"]), str(item["labelKey"])) for item in raw]


def domains_of_node(levels: Sequence[Level], node_labels: Mapping[str, str]) -> dict[str, str]:
    """domain -> value for every level whose label the node carries."""
    return {level.domain: node_labels[level.label_key] for level in levels if level.label_key in node_labels}


def missing_labels(pod_labels: Mapping[str, str], domains: Mapping[str, str]) -> dict[str, str]:
    """The ``grove.io/topology.<domain>`` labels the pod lacks or has wrong."""
    wanted = {f"{TOPOLOGY_LABEL_PREFIX}{domain}": value for domain, value in domains.items()}
    return {key: value for key, value in wanted.items() if pod_labels.get(key) != value}


def labelled_domains(pod: Pod) -> dict[str, str]:
    """domain -> value of the ``grove.io/topology.<domain>`` labels the pod carries."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {k[len(TOPOLOGY_LABEL_PREFIX) :]: v for k, v in labels.items() if k.startswith(TOPOLOGY_LABEL_PREFIX)}


def wants_injection(pod: Pod) -> str | None:
    """The ClusterTopology name when the pod asks for topology labels, else None."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    name = annotations.get(CLUSTER_TOPOLOGY_ANNOTATION)
    return str(name) if name else None
