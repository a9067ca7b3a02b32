"""Deliberately non-conforming routers, built from the reference parts with one rule broken each.

The suite must fail every one of them (``tests/certify/test_router_topology.py``);
each names the rule it breaks and the conformance test expected to catch it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fixtures.reference.adapter import ReferenceImplementation
from reference_impl.frontend import app as frontend_app
from reference_impl.frontend import topology
from reference_impl.frontend.discovery import WorkerInfo
from reference_impl.frontend.router import ModelWorkers


def _ignore_topology(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    return dataclasses.replace(config, topology=topology.TopologyPolicy(None, topology.FAIL))


def _always_fallback(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    return dataclasses.replace(config, topology=topology.TopologyPolicy(config.topology.level, topology.FALLBACK))


def _filter_even_when_unset(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    level = config.topology.level or "host"
    return dataclasses.replace(config, topology=topology.TopologyPolicy(level, config.topology.mismatch_policy))


def _admit_unlabelled(frontend: frontend_app.Frontend) -> None:
    router = frontend.router
    original = router.decode

    def decode(workers: ModelWorkers, prefill: WorkerInfo, isl: int) -> WorkerInfo:
        level = router.topology.level
        if level is None:
            return original(workers, prefill, isl)
        value = prefill.domains.get(level)
        # Broken: a worker without the level's label counts as being in every domain.
        eligible: Sequence[WorkerInfo] = [d for d in workers.decode if d.domains.get(level, value) == value]
        if not eligible:
            raise topology.NoSameDomainDecode(level, value or topology.MISSING, prefill.engine_id)
        return router.policy.choose(eligible, isl, {}, {}, decode_leg=True)

    router.decode = decode  # type: ignore[method-assign]


def IgnoresTopology() -> ReferenceImplementation:
    """Routes as if no level were configured. Caught by RouterTopologyTransfersStayInDomain."""
    return ReferenceImplementation(config_hook=_ignore_topology)


def FallsBackUnderFail() -> ReferenceImplementation:
    """Falls back across domains although fail is configured. Caught by RouterTopologyFailWithoutSameDomainDecode."""
    return ReferenceImplementation(config_hook=_always_fallback)


def RoutesToUnlabelled() -> ReferenceImplementation:
    """Routes KV to decode workers missing the level's label. Caught by RouterTopologyExcludesWorkersMissingLabel."""
    return ReferenceImplementation(frontend_hook=_admit_unlabelled)


def FiltersWhenUnset() -> ReferenceImplementation:
    """Filters by host although no level is configured. Caught by RouterTopologyLevelUnsetNoFiltering."""
    return ReferenceImplementation(config_hook=_filter_even_when_unset)
