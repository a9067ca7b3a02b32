"""Topology domains of a worker and the distance between two workers.

A worker knows its domains as a mapping level -> value (``{"zone": "a", "rack": "r1", "host":
"n3"}``), read at start-up from files (seed 000: one file per level under
``/etc/podinfo/topology``). Levels are ordered broad to narrow. The distance between two workers
is the broadest level at which their values differ: ``zone`` means a cross-zone transfer,
``host`` two hosts in one rack, ``local`` no level differs, and ``unknown`` when the two share
no level to compare. The fake network prices a KV transfer by this distance (seed 000's cost:
latency + kv_bytes / bandwidth, from a per-level QoS table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_LEVELS: tuple[str, ...] = ("region", "zone", "block", "rack", "host")
LOCAL = "local"
UNKNOWN = "unknown"

Domains = Mapping[str, str]


def distance(a: Domains, b: Domains, levels: Sequence[str] = DEFAULT_LEVELS) -> str:
    """The broadest level at which ``a`` and ``b`` differ; LOCAL if none, UNKNOWN if none comparable."""
    compared = False
    for level in levels:
        if level in a and level in b:
            compared = True
            if a[level] != b[level]:
                return level
    return LOCAL if compared else UNKNOWN


@dataclass(frozen=True)
class LinkQos:
    """One row of the QoS table: fixed latency plus a bandwidth."""

    latency_ms: float
    bandwidth_gbps: float  # gigabytes per second

    def transfer_ms(self, kv_bytes: int) -> float:
        return self.latency_ms + kv_bytes / (self.bandwidth_gbps * 1e9) * 1000.0


DEFAULT_QOS: dict[str, LinkQos] = {
    LOCAL: LinkQos(latency_ms=0.005, bandwidth_gbps=400.0),
    "host": LinkQos(latency_ms=0.02, bandwidth_gbps=50.0),
    "rack": LinkQos(latency_ms=0.1, bandwidth_gbps=25.0),
    "block": LinkQos(latency_ms=0.5, bandwidth_gbps=12.5),
    "zone": LinkQos(latency_ms=2.0, bandwidth_gbps=5.0),
    "region": LinkQos(latency_ms=20.0, bandwidth_gbps=1.0),
    UNKNOWN: LinkQos(latency_ms=20.0, bandwidth_gbps=1.0),
}
