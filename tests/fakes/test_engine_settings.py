"""A fake engine's configuration survives the JSON a hosting program is given (``servecert.fakes.dynamo_worker``)."""

from __future__ import annotations

import json

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec, engine_config, engine_settings
from servecert.fakes import engine_settings as settings_module


def test_what_an_adapter_writes_the_hosting_program_reads_back_unchanged() -> None:
    worker = WorkerSpec(
        "prefill",
        name="p-7",
        domains={"zone": "z1", "rack": "z1-r2"},
        block_size=32,
        context_length=4096,
        tensor_parallel_size=2,
        engine_version="3",
        protocol_version="2",
        num_gpu_blocks=999,
        startup_seconds=4.0,
        max_num_batched_tokens=2048,
    )
    spec = DeploymentSpec(model="m-x", router=RouterSpec(topology_level="rack"), workers=(worker,), time_scale=4.0, timing="polynomial")
    config = engine_config(worker, spec)
    written = json.loads(json.dumps(engine_settings(config, spec.timing)))  # NB: through a command line, as JSON
    assert settings_module.from_settings(written) == config


def test_the_contract_hands_out_the_fakes_own_writer() -> None:
    assert engine_settings is settings_module.to_settings
