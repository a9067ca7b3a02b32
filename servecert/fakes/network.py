"""The fake network between engines: what a KV transfer costs, by topology distance.

transfer_ms = latency(distance) + kv_bytes / bandwidth(distance) (seed 000's cost formula), with
distance the broadest topology level at which sender and receiver differ and kv_bytes = tokens x
kv_bytes_per_token. The QoS table is configurable from a JSON/YAML file mapping a distance
(``local``, ``host``, ``rack``, ``zone``, ..., ``unknown``) to ``{latency_ms, bandwidth_gbps}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from servecert.protocol import topology


@dataclass(frozen=True)
class Transfer:
    distance: str
    kv_bytes: int
    duration_ms: float


@dataclass(frozen=True)
class FakeNetwork:
    qos: Mapping[str, topology.LinkQos] = field(default_factory=lambda: dict(topology.DEFAULT_QOS))
    levels: Sequence[str] = topology.DEFAULT_LEVELS

    def price(self, source: topology.Domains, dest: topology.Domains, kv_bytes: int) -> Transfer:
        dist = topology.distance(source, dest, self.levels)
        link = self.qos.get(dist) or self.qos.get(topology.UNKNOWN) or topology.DEFAULT_QOS[topology.UNKNOWN]
        return Transfer(distance=dist, kv_bytes=kv_bytes, duration_ms=link.transfer_ms(kv_bytes))


def load_qos(path: Path) -> dict[str, topology.LinkQos]:
    """Read a QoS table; rows not given keep their defaults."""
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"QoS table {path}: expected a mapping of distance -> {{latency_ms, bandwidth_gbps}}")
    table = dict(topology.DEFAULT_QOS)
    for name, row in data.items():
        try:
            table[str(name)] = topology.LinkQos(float(row["latency_ms"]), float(row["bandwidth_gbps"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"QoS table {path}: row {name!r} needs numeric latency_ms and bandwidth_gbps") from exc
        if table[str(name)].bandwidth_gbps <= 0:
            raise ValueError(f"QoS table {path}: row {name!r} bandwidth_gbps must be > 0")
    return table
