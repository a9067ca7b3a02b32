"""Topology at engine start-up: which domains the worker is in, read from env and files.

Two spellings are accepted, so the fake engine can stand in for a worker of either design:

- seed 000: ``DYN_TOPOLOGY_ENABLED=true``; one file per level under ``/etc/podinfo/topology``
  (projected from the pod's ``grove.io/topology.<level>`` labels); the level KV transfers must
  stay within is ``DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL`` when the worker is told it.
- Dynamo 1.6: ``DYN_TOPOLOGY_MOUNT_PATH`` (the folder), ``DYN_KV_TRANSFER_DOMAIN`` (the
  level), ``DYN_KV_TRANSFER_ENFORCEMENT`` = required | preferred (default required), and
  ``DYN_KV_TRANSFER_PREFERRED_WEIGHT`` (a finite float, required for and only allowed with
  preferred).

When enabled, start-up polls for the level's file (or, with no level named, for any file) until
``DYN_TOPOLOGY_WAIT_SECONDS`` (default 30) and then fails, naming the file: the seed's "hard
exit". Every visible, non-empty file in the folder becomes one domain. A bad value fails
start-up with a message naming the variable. Nothing here sleeps unless enabled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servecert.fakes.pod_runner import atomic_dir
from servecert.protocol import waiting

SEED_MOUNT_PATH = "/etc/podinfo/topology"
REQUIRED = "required"
PREFERRED = "preferred"
_TRUE = {"true", "1", "on", "yes"}
_FALSE = {"false", "0", "off", "no", ""}


class TopologyStartupError(Exception):
    """The worker must not start; the message says which variable or file is at fault."""


@dataclass(frozen=True)
class TopologyConfig:
    enabled: bool = False
    domains: dict[str, str] = field(default_factory=dict)
    transfer_domain: str | None = None
    enforcement: str = REQUIRED
    preferred_weight: float | None = None
    mount_path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "topology_domains": dict(self.domains),
            "kv_transfer_domain": self.transfer_domain,
            "kv_transfer_enforcement": self.enforcement,
            "kv_transfer_preferred_weight": self.preferred_weight,
        }


def read_files(folder: Path) -> dict[str, str]:
    """Every visible, non-empty regular file of ``folder`` as domain -> stripped content.

    A volume the pod runner wrote (kubelet's ``..data`` layout) is read from one payload, so a
    label update racing this read cannot mix old and new values.
    """
    domains: dict[str, str] = {}
    if not folder.is_dir():
        return domains
    for entry in sorted(atomic_dir.read_snapshot(folder).iterdir()):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        value = entry.read_text().strip()
        if value:
            domains[entry.name] = value
    return domains


def _enabled(env: Mapping[str, str]) -> bool:
    raw = env.get("DYN_TOPOLOGY_ENABLED", "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise TopologyStartupError(
        f"DYN_TOPOLOGY_ENABLED={env['DYN_TOPOLOGY_ENABLED']!r} is not a boolean: use true or false"
    )


def _policy(env: Mapping[str, str]) -> tuple[str, float | None]:
    enforcement = env.get("DYN_KV_TRANSFER_ENFORCEMENT", REQUIRED).strip().lower() or REQUIRED
    if enforcement not in (REQUIRED, PREFERRED):
        raise TopologyStartupError(
            f"DYN_KV_TRANSFER_ENFORCEMENT must be 'required' or 'preferred', got {enforcement!r}"
        )
    raw_weight = env.get("DYN_KV_TRANSFER_PREFERRED_WEIGHT")
    if raw_weight is None or raw_weight.strip() == "":
        if enforcement == PREFERRED:
            raise TopologyStartupError(
                "DYN_KV_TRANSFER_PREFERRED_WEIGHT is required when DYN_KV_TRANSFER_ENFORCEMENT is preferred"
            )
        return enforcement, None
    if enforcement != PREFERRED:
        raise TopologyStartupError(
            "DYN_KV_TRANSFER_PREFERRED_WEIGHT may only be set when DYN_KV_TRANSFER_ENFORCEMENT is preferred"
        )
    try:
        weight = float(raw_weight)
    except ValueError:
        raise TopologyStartupError(f"DYN_KV_TRANSFER_PREFERRED_WEIGHT={raw_weight!r} is not a number") from None
    if not math.isfinite(weight):
        raise TopologyStartupError(f"DYN_KV_TRANSFER_PREFERRED_WEIGHT must be finite, got {raw_weight!r}")
    return enforcement, weight


def _wait_seconds(env: Mapping[str, str]) -> float:
    raw = env.get("DYN_TOPOLOGY_WAIT_SECONDS", "30")
    try:
        value = float(raw)
    except ValueError:
        raise TopologyStartupError(f"DYN_TOPOLOGY_WAIT_SECONDS={raw!r} is not a number of seconds") from None
    if value < 0 or not math.isfinite(value):
        raise TopologyStartupError(f"DYN_TOPOLOGY_WAIT_SECONDS must be >= 0, got {raw!r}")
    return value


def load(env: Mapping[str, str], poll_interval: float = 0.2) -> TopologyConfig:
    """Read the worker's topology from ``env`` and the files it names; raise if it must not start."""
    if not _enabled(env):
        return TopologyConfig()
    folder = Path(env.get("DYN_TOPOLOGY_MOUNT_PATH") or SEED_MOUNT_PATH)
    level = (env.get("DYN_KV_TRANSFER_DOMAIN") or env.get("DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL") or "").strip()
    enforcement, weight = _policy(env)
    wait = _wait_seconds(env)

    def populated() -> dict[str, str] | None:
        found = read_files(folder)
        return found if (level and level in found) or (not level and found) else None

    what = f"topology file {folder / level}" if level else f"any topology file in {folder}"
    domains = waiting.until(
        populated,
        timeout_s=wait,
        what=f"DYN_TOPOLOGY_ENABLED is true: {what} to be populated",
        interval_s=poll_interval,
        describe=lambda: "the worker exits (the pod's topology labels were never projected)",
        error=TopologyStartupError,
    )
    assert domains is not None
    return TopologyConfig(
        enabled=True,
        domains=domains,
        transfer_domain=level or None,
        enforcement=enforcement,
        preferred_weight=weight,
        mount_path=str(folder),
    )


def parse_domains(spec: str) -> dict[str, str]:
    """``zone=a,rack=r1`` -> {"zone": "a", "rack": "r1"} (the CLI's direct spelling)."""
    domains: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise TopologyStartupError(f"--topology item {item!r} must look like level=value")
        domains[key.strip()] = value.strip()
    return domains
