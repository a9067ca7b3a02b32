"""Deliberately non-conforming routers, built from the reference parts with one rule broken each.

The suite must fail every one of them (``tests/certify/test_router_topology.py``), each with the
conformance test of the rule it breaks; each names that rule and that test. Most swap one of the
router's two topology rules (``Router.select_prefill``, ``Router.decode_candidates``) for a
plausible shortcut that gives the rule's answer on the easy placements.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from servecert.adapters.contract import DeploymentSpec, Environment
from servecert.adapters.reference.adapter import FrontendHook, ReferenceDeployment, ReferenceImplementation
from servecert.reference_impl.frontend import app as frontend_app
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import WorkerInfo
from servecert.reference_impl.frontend.router import NoWorkers

Match = Callable[[str, WorkerInfo, WorkerInfo], bool]
SelectPrefill = Callable[[topology.TopologyPolicy, Sequence[WorkerInfo], Sequence[WorkerInfo]], list[WorkerInfo]]


def _ignore_topology(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    return dataclasses.replace(config, topology=topology.TopologyPolicy(None, topology.FAIL))


def _always_fallback(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    return dataclasses.replace(config, topology=topology.TopologyPolicy(config.topology.level, topology.FALLBACK))


def _filter_even_when_unset(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    level = config.topology.level or "host"
    return dataclasses.replace(config, topology=topology.TopologyPolicy(level, config.topology.mismatch_policy))


def _host_for_any_level(config: frontend_app.FrontendConfig) -> frontend_app.FrontendConfig:
    level = "host" if config.topology.level else None
    return dataclasses.replace(config, topology=topology.TopologyPolicy(level, config.topology.mismatch_policy))


def _matching(match: Match) -> FrontendHook:
    """The seed's decode filter with ``match`` in place of "same value at the level"."""

    def candidates(policy: topology.TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> topology.DecodeChoice:
        level = policy.level
        if level is None:
            return topology.DecodeChoice(list(decode))
        same = [d for d in decode if match(level, prefill, d)]
        if same:
            return topology.DecodeChoice(same)
        if policy.mismatch_policy == topology.FAIL:
            raise topology.NoSameDomainDecode(level, prefill.domains.get(level, topology.MISSING), prefill.engine_id)
        return topology.DecodeChoice(list(decode), fallback=True)

    def hook(frontend: frontend_app.Frontend) -> None:
        frontend.router.decode_candidates = candidates

    return hook


def _selecting(select: SelectPrefill) -> FrontendHook:
    def hook(frontend: frontend_app.Frontend) -> None:
        frontend.router.select_prefill = select

    return hook


def _unlabelled_in_every_domain(level: str, prefill: WorkerInfo, d: WorkerInfo) -> bool:
    return d.domains.get(level, prefill.domains.get(level)) == prefill.domains.get(level)


def _every_label(level: str, prefill: WorkerInfo, d: WorkerInfo) -> bool:
    return dict(d.domains) == dict(prefill.domains)


def _missing_equals_missing(level: str, prefill: WorkerInfo, d: WorkerInfo) -> bool:
    return d.domains.get(level) == prefill.domains.get(level)  # Broken: two missing labels compare equal (None == None).


def _unlabelled_prefill_anywhere(level: str, prefill: WorkerInfo, d: WorkerInfo) -> bool:
    return level not in prefill.domains or (level in d.domains and d.domains[level] == prefill.domains[level])


def _fall_back_nearby(frontend: frontend_app.Frontend) -> None:
    def candidates(policy: topology.TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> topology.DecodeChoice:
        choice = topology.decode_candidates(policy, prefill, decode)
        if not choice.fallback:
            return choice
        near = [d for d in choice.candidates if any(d.domains.get(k) == v for k, v in prefill.domains.items())]
        return topology.DecodeChoice(near or choice.candidates, fallback=True)

    frontend.router.decode_candidates = candidates


def _keep_fallback_workers(frontend: frontend_app.Frontend) -> None:
    remembered: dict[str, list[WorkerInfo]] = {}

    def candidates(policy: topology.TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> topology.DecodeChoice:
        choice = topology.decode_candidates(policy, prefill, decode)
        if choice.fallback:
            remembered[prefill.engine_id] = list(choice.candidates)
            return choice
        # Broken: the decode workers a prefill worker fell back to stay candidates once a same-domain one is there.
        present, chosen = {d.engine_id for d in decode}, {c.engine_id for c in choice.candidates}
        kept = [d for d in remembered.get(prefill.engine_id, []) if d.engine_id in present and d.engine_id not in chosen]
        return topology.DecodeChoice([*choice.candidates, *kept])

    frontend.router.decode_candidates = candidates


def _refuse_unlabelled_prefill(frontend: frontend_app.Frontend) -> None:
    def candidates(policy: topology.TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> topology.DecodeChoice:
        level = policy.level
        if level is not None and level not in prefill.domains:  # Broken: no fallback for a prefill worker without the label.
            raise topology.NoSameDomainDecode(level, topology.MISSING, prefill.engine_id)
        return topology.decode_candidates(policy, prefill, decode)

    frontend.router.decode_candidates = candidates


def _fall_back_silently(frontend: frontend_app.Frontend) -> None:
    silent = logging.getLogger("servecert.nonconforming.silent")
    silent.disabled = True
    frontend.router.log = silent


def _no_preselection(policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]) -> list[WorkerInfo]:
    return list(prefill)


def _preselect_under_fail_only(
    policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]
) -> list[WorkerInfo]:
    return topology.eligible_prefill(policy, prefill, decode) if policy.mismatch_policy == topology.FAIL else list(prefill)


def _preselect_without_fallback(
    policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]
) -> list[WorkerInfo]:
    level = policy.level
    if level is None:
        return list(prefill)
    present = {d.domains[level] for d in decode if level in d.domains}
    preferred = [p for p in prefill if p.domains.get(level) in present]
    if not preferred:
        raise NoWorkers(f"no prefill worker has a decode worker in its {level}")
    return preferred


def _preselect_when_unset(
    policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]
) -> list[WorkerInfo]:
    return topology.eligible_prefill(topology.TopologyPolicy(policy.level or "host", policy.mismatch_policy), prefill, decode)


def _preselect_once_per_prefill_set() -> SelectPrefill:
    cache: dict[tuple[str, ...], list[str]] = {}

    def select(policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]) -> list[WorkerInfo]:
        key = tuple(sorted(p.engine_id for p in prefill))
        if key not in cache:  # Broken: recomputed only when the prefill workers change, not when decode workers do.
            cache[key] = [p.engine_id for p in topology.eligible_prefill(policy, prefill, decode)]
        return [p for p in prefill if p.engine_id in cache[key]]

    return select


def _preselect_counting_unlabelled(
    policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]
) -> list[WorkerInfo]:
    level = policy.level
    if level is None:
        return list(prefill)
    # Broken: a decode worker missing the level's label counts as in every domain for pre-selection (not for routing).
    if any(level not in d.domains for d in decode):
        return list(prefill)
    return topology.eligible_prefill(policy, prefill, decode)


def _preselect_growing_only() -> SelectPrefill:
    preferred: set[str] = set()

    def select(policy: topology.TopologyPolicy, prefill: Sequence[WorkerInfo], decode: Sequence[WorkerInfo]) -> list[WorkerInfo]:
        level = policy.level
        if level is None:
            return list(prefill)
        present = {d.domains[level] for d in decode if level in d.domains}
        # Broken: a prefill worker that gained a same-domain decode worker stays preferred after it leaves.
        preferred.update(p.engine_id for p in prefill if p.domains.get(level, topology.MISSING) in present)
        return [p for p in prefill if p.engine_id in preferred] or list(prefill)

    return select


def _keep_left_decode(frontend: frontend_app.Frontend) -> None:
    original = frontend._on_change

    def on_change(kind: str, worker: WorkerInfo) -> None:
        if kind == "removed" and worker.role == "decode":
            return  # Broken: a decode worker that left stays routable.
        original(kind, worker)

    frontend._on_change = on_change  # type: ignore[method-assign]


_PLAIN_GENERATE = frontend_app._generate
Generate = Callable[..., Awaitable[web.StreamResponse]]


def _any_error(err: frontend_app.UpstreamError) -> bool:
    return True


def _unreachable(err: frontend_app.UpstreamError) -> bool:
    """What a generic HTTP retry layer retries: a refused or cut connection, not an error answer."""
    return bool(err.body.get("error", {}).get("code") == "worker_unreachable")


RETRY_TIMEOUT_S = 2.0
"""The broken timeout-and-retry router's per-attempt timeout: shorter than the suite's injected stall."""


async def _on_another_decode(
    request: web.Request, fe: frontend_app.Frontend, req: Any, request_id: str, worker: WorkerInfo, handle: dict[str, Any], isl: int
) -> web.StreamResponse | None:
    """The broken retry: the request's decode leg again on any other decode worker, whatever its domain; None if none."""
    others = [d for d in fe.router.workers(req.model).decode if d.engine_id != worker.engine_id]
    if not others:
        return None
    return await _PLAIN_GENERATE(request, fe, req, request_id, others[0], handle, isl)


def _generate_retrying_anywhere(
    retry_when: Callable[[frontend_app.UpstreamError], bool], unary_only: bool = False, timeout_s: float | None = None
) -> Generate:
    """The reference's decode leg under a broken retry layer: a failed leg (``retry_when``), or with ``timeout_s`` a unary
    leg slower than that, is sent again to another decode worker."""

    async def generate(
        request: web.Request,
        fe: frontend_app.Frontend,
        req: Any,
        request_id: str,
        worker: WorkerInfo,
        handle: dict[str, Any] | None,
        isl: int,
    ) -> web.StreamResponse:
        attempt = _PLAIN_GENERATE(request, fe, req, request_id, worker, handle, isl)
        timed = timeout_s is not None and not req.stream and handle is not None
        try:
            return await (asyncio.wait_for(attempt, timeout_s) if timed else attempt)
        except (frontend_app.UpstreamError, TimeoutError) as err:
            failed = isinstance(err, frontend_app.UpstreamError) and retry_when(err) and not (unary_only and req.stream)
            if handle is None or not (failed or (timed and isinstance(err, TimeoutError))):
                raise
            retried = await _on_another_decode(request, fe, req, request_id, worker, handle, isl)
            if retried is None:
                raise
            return retried

    return generate


def _never(err: frontend_app.UpstreamError) -> bool:
    return False


def _retrying_decode_anywhere(
    retry_when: Callable[[frontend_app.UpstreamError], bool], unary_only: bool = False, timeout_s: float | None = None
) -> FrontendHook:
    def hook(frontend: frontend_app.Frontend) -> None:
        # NB: the request path calls the module's _generate; this implementation owns its certify process.
        frontend_app._generate = _generate_retrying_anywhere(retry_when, unary_only, timeout_s)  # type: ignore[assignment]

    return hook


@dataclasses.dataclass
class _DefaultsToFallback(ReferenceImplementation):
    async def deploy(self, spec: DeploymentSpec, env: Environment) -> ReferenceDeployment:
        if spec.router.mismatch_policy is None:  # Broken: an unset policy means fallback.
            spec = dataclasses.replace(spec, router=dataclasses.replace(spec.router, mismatch_policy=topology.FALLBACK))
        return await super().deploy(spec, env)


def _fail_with_500(frontend: frontend_app.Frontend) -> None:
    def candidates(policy: topology.TopologyPolicy, prefill: WorkerInfo, decode: Sequence[WorkerInfo]) -> topology.DecodeChoice:
        try:
            return topology.decode_candidates(policy, prefill, decode)
        except topology.NoSameDomainDecode:
            raise web.HTTPInternalServerError() from None  # Broken: the default path's own error, not fail's 503.

    frontend.router.decode_candidates = candidates


@dataclasses.dataclass
class _DefaultErrorDiffers(ReferenceImplementation):
    async def deploy(self, spec: DeploymentSpec, env: Environment) -> ReferenceDeployment:
        if spec.router.mismatch_policy is None:
            return await ReferenceImplementation(frontend_hook=_fail_with_500).deploy(spec, env)
        return await super().deploy(spec, env)


@dataclasses.dataclass
class _PreselectsOnlyWhenPolicySet(ReferenceImplementation):
    async def deploy(self, spec: DeploymentSpec, env: Environment) -> ReferenceDeployment:
        if spec.router.mismatch_policy is None:  # Broken: the default path skips pre-selection.
            return await ReferenceImplementation(frontend_hook=_selecting(_no_preselection)).deploy(spec, env)
        return await super().deploy(spec, env)


def IgnoresTopology() -> ReferenceImplementation:
    """Routes as if no level were configured. Caught by RouterTopologyTransfersStayInDomain."""
    return ReferenceImplementation(config_hook=_ignore_topology)


def FallsBackUnderFail() -> ReferenceImplementation:
    """Falls back across domains although fail is configured. Caught by RouterTopologyFailWithoutSameDomainDecode."""
    return ReferenceImplementation(config_hook=_always_fallback)


def RoutesToUnlabelled() -> ReferenceImplementation:
    """Routes KV to decode workers missing the level's label. Caught by RouterTopologyExcludesWorkersMissingLabel."""
    return ReferenceImplementation(frontend_hook=_matching(_unlabelled_in_every_domain))


def FiltersWhenUnset() -> ReferenceImplementation:
    """Filters by host although no level is configured. Caught by RouterTopologyLevelUnsetNoFiltering."""
    return ReferenceImplementation(config_hook=_filter_even_when_unset)


def ComparesEveryLabel() -> ReferenceImplementation:
    """A decode worker must match the prefill at every level, not only the configured one. Caught by RouterTopologyMatchesTheLevelOnly."""
    return ReferenceImplementation(frontend_hook=_matching(_every_label))


def ComparesTheHost() -> ReferenceImplementation:
    """Filters on the host whatever level is configured. Caught by RouterTopologyMatchesTheLevelOnly."""
    return ReferenceImplementation(config_hook=_host_for_any_level)


def FallsBackNearby() -> ReferenceImplementation:
    """Falls back only to decode workers sharing some label with the prefill. Caught by RouterTopologyFallbackRoutesAnywhere."""
    return ReferenceImplementation(frontend_hook=_fall_back_nearby)


def KeepsFallingBack() -> ReferenceImplementation:
    """Keeps the decode workers a prefill worker fell back to among its candidates after a same-domain one joins.
    Caught by RouterTopologyFallbackKeepsSameDomain."""
    return ReferenceImplementation(frontend_hook=_keep_fallback_workers)


def FallsBackSilently() -> ReferenceImplementation:
    """Falls back without the warning the seed asks for. Caught by RouterTopologyFallbackRoutesAnywhere."""
    return ReferenceImplementation(frontend_hook=_fall_back_silently)


def MissingLabelsMatch() -> ReferenceImplementation:
    """Compares the level's labels with missing ones equal, so two unlabelled workers share a domain.
    Caught by RouterTopologyPrefillMissingLabel."""
    return ReferenceImplementation(frontend_hook=_matching(_missing_equals_missing))


def UnlabelledPrefillAnywhere() -> ReferenceImplementation:
    """A prefill worker missing the level counts as in every domain. Caught by RouterTopologyPrefillMissingLabel."""
    return ReferenceImplementation(frontend_hook=_matching(_unlabelled_prefill_anywhere))


def RefusesUnlabelledPrefill() -> ReferenceImplementation:
    """Refuses requests of a prefill worker missing the level, even under fallback. Caught by RouterTopologyPrefillMissingLabelFallback."""
    return ReferenceImplementation(frontend_hook=_refuse_unlabelled_prefill)


def NoPreselection() -> ReferenceImplementation:
    """Chooses the prefill worker without regard to decode workers' domains. Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_no_preselection))


def PreselectsUnderFailOnly() -> ReferenceImplementation:
    """Pre-selects prefill workers under fail, not under fallback. Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_under_fail_only))


def PreselectsWithoutFallback() -> ReferenceImplementation:
    """With no prefill worker beside a decode worker, refuses instead of using them all. Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_without_fallback))


def PreselectsWhenUnset() -> ReferenceImplementation:
    """Pre-selects prefill workers by host although no level is set. Caught by RouterTopologyLevelUnsetNoFiltering."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_when_unset))


def PreselectsOnStaleDecodeSet() -> ReferenceImplementation:
    """Recomputes the preferred prefill workers only when the prefill workers change. Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_once_per_prefill_set()))


def PreselectionNeverShrinks() -> ReferenceImplementation:
    """Adds a prefill worker to its preferred set when a decode worker joins its domain, never removes it when that one leaves.
    Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_growing_only()))


def PreselectsWithUnlabelledDecode() -> ReferenceImplementation:
    """Counts a decode worker missing the level's label as in every domain when it pre-selects prefill workers.
    Caught by RouterTopologyPrefillPreselection."""
    return ReferenceImplementation(frontend_hook=_selecting(_preselect_counting_unlabelled))


def PreselectsOnlyWhenPolicySet() -> ReferenceImplementation:
    """Pre-selects prefill workers under an explicit policy, not when it is left unset. Caught by RouterTopologyPrefillPreselection."""
    return _PreselectsOnlyWhenPolicySet()


def DefaultsToFallback() -> ReferenceImplementation:
    """Treats an unset mismatch policy as fallback. Caught by RouterTopologyDefaultPolicyIsFail."""
    return _DefaultsToFallback()


def DefaultErrorDiffers() -> ReferenceImplementation:
    """Fails requests under an unset policy, but with a 500 where its explicit fail answers 503.
    Caught by RouterTopologyDefaultPolicyIsFail."""
    return _DefaultErrorDiffers()


def RetriesDecodeAnywhere() -> ReferenceImplementation:
    """Retries a failed decode leg on any other decode worker. Caught by RouterTopologyFailedDecodeStaysInDomain."""
    return ReferenceImplementation(frontend_hook=_retrying_decode_anywhere(_any_error))


def RetriesUnreachableDecodeAnywhere() -> ReferenceImplementation:
    """Retries a decode leg whose worker refused or cut the connection (not an error answer) on any other decode worker.
    Caught by RouterTopologyFailedDecodeStaysInDomain."""
    return ReferenceImplementation(frontend_hook=_retrying_decode_anywhere(_unreachable))


def RetriesUnaryDecodeAnywhere() -> ReferenceImplementation:
    """Retries a failed decode leg of a unary (non-streamed) request on any other decode worker; streams are left alone.
    Caught by RouterTopologyFailedDecodeStaysInDomain."""
    return ReferenceImplementation(frontend_hook=_retrying_decode_anywhere(_any_error, unary_only=True))


def RetriesSlowDecodeAnywhere() -> ReferenceImplementation:
    """Gives up a unary decode leg after RETRY_TIMEOUT_S and retries it on any other decode worker.
    Caught by RouterTopologyFailedDecodeStaysInDomain."""
    return ReferenceImplementation(frontend_hook=_retrying_decode_anywhere(_never, timeout_s=RETRY_TIMEOUT_S))


def KeepsLeftDecode() -> ReferenceImplementation:
    """Keeps routing to a decode worker that left the deployment. Caught by RouterTopologyDecodeJoinsAndLeaves."""
    return ReferenceImplementation(frontend_hook=_keep_left_decode)
