"""A fake engine's configuration as plain JSON, and back: for a program that hosts the fake engine.

An adapter whose implementation reaches workers only through its own runtime (Dynamo's) starts a
program of the suite's that hosts the fake engine on that runtime (``servecert.fakes.dynamo_worker``)
and hands it the engine's configuration on its command line: ``to_settings`` (re-exported by the
vendor contract as ``engine_settings``) writes it, the program reads it back with ``from_settings``.
Only what such a program needs crosses: the model-card parameters, the timing model, the
topology and the simulated start-up time.
"""

from __future__ import annotations

from typing import Any

from servecert.fakes import faults, timing
from servecert.fakes.engine import EngineConfig
from servecert.fakes.topology_env import TopologyConfig


def to_settings(config: EngineConfig, timing_spec: str) -> dict[str, Any]:
    """The fake engine's configuration as plain JSON; ``timing_spec`` is the spec's ``timing`` (``polynomial``, ...)."""
    return {
        "model": config.model,
        "role": config.role,
        "engine_id": config.engine_id,
        "namespace": config.namespace,
        "time_scale": config.time_scale,
        "block_size": config.block_size,
        "num_gpu_blocks": config.num_gpu_blocks,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "context_length": config.context_length,
        "tensor_parallel_size": config.tensor_parallel_size,
        "engine_version": config.engine_version,
        "protocol_version": config.protocol_version,
        "timing": timing_spec,
        "heartbeat_seconds": config.heartbeat_seconds,
        "startup_seconds": config.faults.startup_seconds,
        "domains": dict(config.topology.domains),
        "topology": config.topology.to_dict(),
    }


def from_settings(settings: dict[str, Any]) -> EngineConfig:
    """The configuration ``to_settings`` wrote."""
    topo = settings.get("topology") or {}
    return EngineConfig(
        model=str(settings["model"]),
        role=str(settings["role"]),
        engine_id=str(settings["engine_id"]),
        namespace=str(settings["namespace"]),
        time_scale=float(settings["time_scale"]),
        block_size=int(settings["block_size"]),
        num_gpu_blocks=int(settings["num_gpu_blocks"]),
        max_num_seqs=int(settings["max_num_seqs"]),
        max_num_batched_tokens=int(settings["max_num_batched_tokens"]),
        context_length=int(settings["context_length"]),
        tensor_parallel_size=int(settings["tensor_parallel_size"]),
        engine_version=str(settings["engine_version"]),
        protocol_version=str(settings["protocol_version"]),
        timing=timing.from_spec(str(settings["timing"])),
        heartbeat_seconds=float(settings["heartbeat_seconds"]),
        topology=TopologyConfig(
            enabled=bool(settings["domains"]) or bool(topo.get("kv_transfer_domain")),
            domains={str(k): str(v) for k, v in dict(settings["domains"]).items()},
            transfer_domain=topo.get("kv_transfer_domain"),
            enforcement=str(topo.get("kv_transfer_enforcement") or "required"),
            preferred_weight=topo.get("kv_transfer_preferred_weight"),
        ),
        faults=faults.Faults(startup_seconds=float(settings.get("startup_seconds") or 0.0)),
    )
