"""Profiles: named bundles of features an implementation is certified against.

A profile (gateway-api ``ConformanceProfile``, GEP-1709) says which features every claimant
must pass (``core``) and which it may claim one by one (``extended``), and in which
environments its tests can run. The runner collects a test for a profile when all of the test's
features belong to the profile; the report gives each profile a core and an extended result.
A feature that only one environment can show (``judged_in``: PLANNER-SCALING's connectors, the
Virtual one in process, the Kubernetes one on a cluster) is judged there alone: elsewhere its
tests count nowhere and the report lists them as judged elsewhere, rather than as skips that
would leave every run partial. The same holds for a test that runs in only some of its profile's
environments (``ConformanceTest.environments``): the others list it as judged elsewhere.
Downstream suites may ``register`` profiles of their own (from a pytest plugin loaded with ``-p``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from servecert import features

if TYPE_CHECKING:
    from servecert.conformance.suite.test_case import ConformanceTest


@dataclass(frozen=True)
class Profile:
    name: str
    core: frozenset[str]
    extended: frozenset[str]
    environments: frozenset[str]
    judged_in: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Feature -> the environments that can judge it (a feature not named: every environment of the profile)."""

    def __post_init__(self) -> None:
        both = self.core & self.extended
        if both:
            raise ValueError(f"profile {self.name}: features both core and extended: {', '.join(sorted(both))}")
        features.check_known(self.core | self.extended, what=f"profile {self.name}")
        stray = {f: envs - self.environments for f, envs in self.judged_in.items() if f not in self.features or envs - self.environments}
        if stray:
            raise ValueError(f"profile {self.name}: judged_in names features or environments it does not have: {stray}")

    def judged_elsewhere(self, environment: str) -> frozenset[str]:
        """The profile's features that ``environment`` cannot judge."""
        return frozenset(f for f, envs in self.judged_in.items() if environment not in envs)

    def tests_judged_elsewhere(self, tests: Iterable[ConformanceTest], environment: str) -> frozenset[str]:
        """The profile's tests (``ShortName``) and cases (``ShortName[case]``) that run in another of its environments,
        not in ``environment``: a test or case declares where it adds evidence (``ConformanceTest.environments``,
        ``Case.environments``), and a rule the process environment judges in full need not be judged again on a
        cluster that adds nothing to it (``docs/suite.md``, "Which environment judges what")."""
        if environment not in self.environments:
            return frozenset()
        mine = [test for test in tests if self.covers(test.features)]
        whole = {t.short_name for t in mine if environment not in t.environments and t.environments & self.environments}
        cases = {
            t.case_name(case)
            for t in mine
            if environment in t.environments
            for case in t.cases
            if environment not in case.environments and t.runs_in(case) & self.environments
        }
        return frozenset(whole | cases)

    @property
    def features(self) -> frozenset[str]:
        return self.core | self.extended

    def covers(self, test_features: tuple[str, ...] | frozenset[str]) -> bool:
        """Whether a test with these features belongs to the profile (all its features are in it)."""
        return bool(test_features) and set(test_features) <= self.features

    def is_extended(self, test_features: tuple[str, ...] | frozenset[str]) -> bool:
        """A test counts as extended when any of its features is extended, else as core."""
        return bool(set(test_features) & self.extended)


class UnknownProfileError(LookupError):
    """A profile name nobody registered; the message lists the known ones."""


ROUTER_TOPOLOGY = Profile(
    "ROUTER-TOPOLOGY",
    # NB: core is seed 000's whole runtime table: its goals make both mismatch policies part of the
    # design ("Support a configurable mismatch policy (fail vs. fallback)"), and its table gives
    # prefill pre-selection a row under both. Extended is what the seed leaves open or the suite adds.
    core=frozenset(
        {
            features.DISAGGREGATED_SERVING,
            features.KV_TRANSFER_TOPOLOGY_FILTER,
            features.KV_TRANSFER_TOPOLOGY_UNSET,
            features.KV_TRANSFER_TOPOLOGY_FALLBACK,
            features.KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION,
        }
    ),
    extended=frozenset(
        {
            features.KV_TRANSFER_TOPOLOGY_ERROR_503,
            features.KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT,
            features.KV_TRANSFER_TOPOLOGY_LATENCY,
        }
    ),
    # NB: in process its tests deploy through Implementation.deploy on engines the environment starts;
    # on a cluster the suite writes a DGD and the implementation's operator deploys it (servecert.harness.cluster_deploy).
    environments=frozenset({"process", "cluster"}),
)

PLANNER_SCALING = Profile(
    "PLANNER-SCALING",
    core=frozenset(
        {
            features.PLANNER_VIRTUAL_CONNECTOR,
            # NB: core, as seed 003's Connector Design gives the planner its KubernetesConnector for a DGD; judged on a cluster.
            features.PLANNER_KUBERNETES_CONNECTOR,
            features.PLANNER_LOAD_BASED_SCALING,
            features.PLANNER_SCALING_BOUNDS,
            features.PLANNER_STABILITY,
            # NB: core, as seed 003 makes SLA attainment the planner's purpose ("Load-based scaling is the faster reactive
            # SLA-correction loop"); the 95% figure is the suite's.
            features.PLANNER_SLA_ATTAINMENT,
        }
    ),
    extended=frozenset(),
    # NB: on a cluster the implementation's planner runs as a DGD component and scales the DGD through its operator
    # (seed 003's KubernetesConnector); the tests of the Virtual connector's acknowledgements run in process only.
    environments=frozenset({"process", "cluster"}),
    # NB: the Virtual connector is the process environment's (the suite plays the external system); the Kubernetes one
    # needs an operator and an API server.
    judged_in={
        features.PLANNER_VIRTUAL_CONNECTOR: frozenset({"process"}),
        features.PLANNER_KUBERNETES_CONNECTOR: frozenset({"cluster"}),
    },
)

OPERATOR_TOPOLOGY = Profile(
    "OPERATOR-TOPOLOGY",
    core=frozenset(
        {
            features.OPERATOR_TOPOLOGY_ADMISSION,
            features.OPERATOR_TOPOLOGY_INJECTION,
            features.OPERATOR_TOPOLOGY_LABELS,
            features.WORKER_TOPOLOGY_STARTUP,
        }
    ),
    extended=frozenset(),
    environments=frozenset({"cluster"}),
)

INFERENCESERVICE_API = Profile(
    "INFERENCESERVICE-API",
    core=frozenset(
        {
            features.INFERENCE_SERVICE_OBJECTS,
            features.INFERENCE_SERVICE_POD_GROUP,
            features.INFERENCE_SERVICE_STATUS,
            # NB: core, as seed 004 makes the generation the pods' revision "for update detection" and hands pod lifecycle to
            # LWS, which replaces a changed group whole; a controller that never acts on an update breaks both.
            features.INFERENCE_SERVICE_UPDATE,
        }
    ),
    extended=frozenset(),
    environments=frozenset({"cluster"}),
)

GANG_SCHEDULING = Profile(
    "GANG-SCHEDULING",
    core=frozenset(
        {
            features.GANG_SCHEDULING_TABLE,
            features.GANG_REPLICA_ATOMICITY,
            features.GANG_CROSS_ROLE,
            features.GANG_REPLICA_SCALING,
            # NB: core, as seed 002 is the design of network-topology-aware gang scheduling (its hard and soft modes are
            # the API it adds); the implementation asks for it (the InferenceService's schedulingStrategy.networkTopology
            # on its PodGroup) and the tests judge where its pods land.
            features.NETWORK_TOPOLOGY_HARD,
            features.NETWORK_TOPOLOGY_SOFT,
            # NB: core too: task-level topology is seed 002's API (podsNetworkTopology) and its fourth use case the
            # inference service this suite is about (leader free, workers together).
            features.NETWORK_TOPOLOGY_WORKERS,
        }
    ),
    extended=frozenset({features.HYPERNODE_GENERATION}),
    environments=frozenset({"cluster"}),
)

ROLLOUT_ISOLATION = Profile(
    "ROLLOUT-ISOLATION",
    core=frozenset(
        {
            features.ROLLOUT_MDC_ISOLATION,
            features.ROLLOUT_KV_LAYOUT_ISOLATION,
            features.ROLLOUT_RUNTIME_ISOLATION,
            features.ROLLOUT_FRONTEND,
            features.ROLLOUT_PAUSE_RESUME,
            features.ROLLOUT_ROLLBACK,
            features.ROLLOUT_TRAFFIC_SPLIT,
            features.ROLLOUT_STEPS,
        }
    ),
    extended=frozenset({features.ROLLOUT_CONTROLLER_RESTART, features.ROLLOUT_PROXY_REPLICA_LOSS}),
    environments=frozenset({"cluster"}),
)

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (ROUTER_TOPOLOGY, PLANNER_SCALING, OPERATOR_TOPOLOGY, INFERENCESERVICE_API, GANG_SCHEDULING, ROLLOUT_ISOLATION)
}


def register(profile: Profile) -> Profile:
    """Add a profile to the registry; registering the same profile twice is harmless."""
    known = PROFILES.get(profile.name)
    if known is not None and known != profile:
        raise ValueError(f"profile {profile.name!r} is already registered with other features")
    PROFILES[profile.name] = profile
    return profile


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfileError(f"no profile named {name!r}; known profiles: {', '.join(sorted(PROFILES))}") from None


def for_environment(env: str) -> tuple[Profile, ...]:
    """Every registered profile whose tests can run in ``env``, by name."""
    return tuple(PROFILES[name] for name in sorted(PROFILES) if env in PROFILES[name].environments)
