"""The CustomResourceDefinitions the suite installs on every cluster it brings up.

Data flow::

    servecert/harness/cluster/crds/*.yaml     hand-written apiextensions.k8s.io/v1 CRDs, one per file,
                                     named <plural>.<group>.yaml (DGD, InferenceService,
                                     ClusterTopology, WorkerMetadata, ...)
        -> suite_crds()              parsed, checked to be one CRD each, sorted by file name
        -> kube.apply_crds(api, ...) at ``embedded.up`` (and by anyone installing on another cluster)

Why YAML files and not Python dicts: they are the artefact a vendor reviews and applies with
``kubectl apply -f``; the schemas and CEL rules are Kubernetes', so they read best as Kubernetes
writes them. Every ``*.yaml`` here is loaded, so adding a CRD is dropping a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).with_name("crds")
CRD_API_VERSION = "apiextensions.k8s.io/v1"


class CrdFileError(ValueError):
    """A file in ``CRD_DIR`` is not one CRD; the message names the file and what to fix."""


def crd_files() -> list[Path]:
    """Every ``*.yaml`` in ``CRD_DIR``, sorted by name."""
    return sorted(CRD_DIR.glob("*.yaml"))


def load_crd(path: Path) -> dict[str, Any]:
    """The single CRD in ``path``; its ``metadata.name`` must be the file's stem."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise CrdFileError(f"cannot read CRD file {path}: {exc}") from exc
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise CrdFileError(f"{path} must hold exactly one YAML document (a CustomResourceDefinition), found {len(docs)}")
    crd: dict[str, Any] = docs[0]
    if crd.get("apiVersion") != CRD_API_VERSION or crd.get("kind") != "CustomResourceDefinition":
        raise CrdFileError(f"{path}: expected apiVersion {CRD_API_VERSION}, kind CustomResourceDefinition")
    name = (crd.get("metadata") or {}).get("name")
    if name != path.stem:
        raise CrdFileError(f"{path}: metadata.name is {name!r}; name the file <plural>.<group>.yaml after it")
    return crd


def suite_crds() -> list[dict[str, Any]]:
    """Every CRD in ``CRD_DIR``, ready for ``kube.apply_crds``."""
    files = crd_files()
    if not files:
        raise CrdFileError(f"no CRD files in {CRD_DIR}; is the package data (servecert/harness/cluster/crds/*.yaml) installed?")
    return [load_crd(path) for path in files]
