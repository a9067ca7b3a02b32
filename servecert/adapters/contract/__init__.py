"""The vendor contract: everything an implementation's adapter provides to the suite, and may call of it.

This is the one module a vendor's adapter imports (``__all__`` is the whole surface; the two in-tree
third-party adapters, ``adapters/dynamo`` and ``adapters/pd_routers``, are examples, walked
through in ``docs/adapters.md``).

An implementation under test (the reference one, Dynamo, a vendor's) is reached only through an
``Implementation`` object. The suite describes what it wants deployed as data — a
``DeploymentSpec``: the model, the router's configuration, the workers with their roles, model
card parameters and topology placement — and the adapter makes it so in the given
``Environment``, returning a ``Deployment`` with a frontend URL the suite sends OpenAI traffic
to. Workers are always the suite's own fake engines (the environment starts them), so the
ground truth of every prefill, decode and KV transfer is the suite's; the adapter decides how
its frontend discovers them and how the requested policy maps onto its own configuration.

Required: ``Implementation`` (``metadata``, ``supported_features``, ``deploy``). Optional, each a
``Protocol`` the suite checks with ``isinstance`` where a feature needs it (the table in
``docs/adapters.md`` says which):

    LoggingDeployment      its router's warnings (seed 000's fallback row: "Log warning")
    PlannedDeployment      a planner on the Virtual connector: its decisions store (PLANNER-SCALING)
    TokenIdPrompts         prompts sent as token ids, for a frontend that tokenizes differently
    ClusterImplementation  installs an operator on a cluster (every cluster profile)
    RestartableOperator    that operator can be killed and started again (RolloutControllerRestart)
    DeploysOnCluster       deploys on a cluster itself, without a DGD (a router with no operator)
    RoutingProbe           the engines a frontend pod routes to now (a gate before traffic)
    ClusterPlanner         the DGD component that runs its planner on a cluster

What the adapter may call of the suite: ``Environment`` (process: start and stop fake engines, the
tools the suite built) and ``ClusterEnvironment`` (cluster: one namespace per case, the admin API
client, a fake engine pod on a node of its own). Feature names are ``features`` (re-exported: the
same constants the tests and profiles use). For an implementation's own processes (a frontend, a
router, a planner): ``Proc`` (one command, its log file, ended by its pid), ``wait_for`` and
``Deadline`` (bounded waits that name what they waited for and the log to read), ``free_port``,
``cache_root`` (where the adapter may keep what it builds). For an implementation that needs the
suite's fake engine on its own wire or its own files: ``engine_settings`` (the engine's
configuration as plain JSON, for a program of the suite's that hosts it, as
``servecert.fakes.dynamo_worker`` does in Dynamo's runtime), ``tokenizer`` (the fake engines'
deterministic tokenizer), ``PD_VLLM``/``PD_SGLANG`` (the engines' P/D handshakes) and
``planner_decisions`` (the Virtual connector's keys and ``ScalingDecision``).

Adapters are found by name through the entry-point group ``servecert.implementations`` (the
reference implementation is registered as ``reference``) or by ``module:attribute``; the
attribute is an ``Implementation`` or a zero-argument callable returning one.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import aiohttp

from servecert import features
from servecert.adapters.contract._processes import Proc, ProcessStartError, free_port, wait_for
from servecert.fakes.engine import EngineConfig
from servecert.fakes.engine_settings import to_settings as engine_settings
from servecert.protocol import planner_decisions, tokenizer
from servecert.protocol.engine_api import PD_SGLANG, PD_VLLM
from servecert.protocol.perf_profile import PerfProfile
from servecert.protocol.planner_decisions import DecisionStore, ScalingDecision
from servecert.protocol.waiting import Deadline

__all__ = [
    "AGG",
    "ARIMA",
    "CONSTANT",
    "DISAGG",
    "ENTRY_POINT_GROUP",
    "FAIL",
    "FALLBACK",
    "KALMAN",
    "KV",
    "PD_SGLANG",
    "PD_VLLM",
    "PREFERRED",
    "RANDOM",
    "REQUIRED",
    "ROUND_ROBIN",
    "VIRTUAL",
    "AdapterError",
    "ClusterEnvironment",
    "ClusterImplementation",
    "ClusterPlanner",
    "Deadline",
    "DecisionStore",
    "Deployment",
    "DeploymentSpec",
    "DeploysOnCluster",
    "EnginePod",
    "Environment",
    "Implementation",
    "ImplementationMetadata",
    "LogRecord",
    "LoggingDeployment",
    "NoOperator",
    "OperatorInstallation",
    "PlannedDeployment",
    "PlannerSpec",
    "Proc",
    "ProcessStartError",
    "RestartableOperator",
    "RouterSpec",
    "RoutingProbe",
    "ScalingDecision",
    "TokenIdPrompts",
    "WorkerRef",
    "WorkerSpec",
    "cache_root",
    "engine_config",
    "engine_settings",
    "features",
    "free_port",
    "load",
    "planner_decisions",
    "sends_token_ids",
    "tokenizer",
    "wait_for",
]

ENTRY_POINT_GROUP = "servecert.implementations"

# Router modes
KV = "kv"
ROUND_ROBIN = "round-robin"
RANDOM = "random"
# Seed 000's mismatch policies
FAIL = "fail"
FALLBACK = "fallback"
# Dynamo 1.6's per-worker enforcement
REQUIRED = "required"
PREFERRED = "preferred"


class AdapterError(Exception):
    """The adapter cannot be found, loaded, or cannot do what was asked; the message says why."""


@dataclass(frozen=True)
class ImplementationMetadata:
    organization: str
    project: str
    url: str
    version: str
    contact: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "organization": self.organization,
            "project": self.project,
            "url": self.url,
            "version": self.version,
            "contact": list(self.contact),
        }


@dataclass(frozen=True)
class RouterSpec:
    """How the frontend routes. ``topology_level`` None means no topology filtering at all."""

    mode: str = KV
    topology_level: str | None = None
    mismatch_policy: str | None = None
    """``fail`` | ``fallback``; None leaves it unset, so the implementation's own default applies (the seed's is fail)."""
    temperature: float = 0.0


@dataclass(frozen=True)
class WorkerSpec:
    """One worker: its role, its model-card parameters and where it sits in the topology.

    ``domains`` is the worker's placement (level -> value); a level absent from it means the
    worker lacks that topology label. ``transfer_enforcement`` / ``preferred_weight`` are the
    per-worker policy of Dynamo 1.6's design (``required`` | ``preferred`` on the level
    ``transfer_domain``), for tests of that spelling; adapters of the seed's design may ignore them.
    """

    role: str
    name: str = ""
    domains: Mapping[str, str] = field(default_factory=dict)
    block_size: int = 16
    context_length: int = 8192
    tensor_parallel_size: int = 1
    engine_version: str = "1"
    protocol_version: str = "1"
    num_gpu_blocks: int = 16384
    transfer_enforcement: str | None = None
    transfer_domain: str | None = None
    preferred_weight: float | None = None
    startup_seconds: float = 0.0  # simulated model-load time before the engine is ready (divided by time_scale)
    max_num_batched_tokens: int = 8192  # tokens one scheduler iteration may process (chunked-prefill budget)
    spec_accept_length: float = 1.0  # speculative decoding: tokens a decode step emits on average (1 = none)


# Planner connectors
VIRTUAL = "virtual"
# Planner load predictors
CONSTANT = "constant"
ARIMA = "arima"
KALMAN = "kalman"
# Planner modes (seed 003 "--mode")
DISAGG = "disagg"
AGG = "agg"


@dataclass(frozen=True)
class PlannerSpec:
    """What the suite asks of an autoscaling planner (seed 003), in simulated time.

    Latencies are simulated milliseconds and intervals simulated seconds: the implementation
    divides them by the deployment's ``time_scale`` (as the fake engines divide their delays).
    ``min_endpoint`` holds for each component; ``max_gpu_budget`` bounds prefill and decode GPUs
    together (``*_engine_num_gpu`` per worker). ``isl``/``osl`` describe the expected request mix
    (Dynamo's ``isl``/``osl``), ``predictor`` the throughput loop's load predictor, ``profile`` the
    pre-deployment data its perf model must start from (None: the planner's own way),
    ``warmup_trace`` a Mooncake JSONL of past arrivals its load predictor starts from (seed 003:
    "All predictors support warm-starting from trace files"; None: none), ``mode`` the planner's mode
    (``agg``: the deployment's workers are one aggregated set, scaled through the decision's decode
    count, seed 003 "--mode agg"). With the
    ``virtual`` connector the planner writes its decisions to the deployment's ``decisions`` store
    (``servecert.protocol.planner_decisions``) and the suite scales the workers.
    """

    ttft_ms: float = 500.0
    itl_ms: float = 50.0
    isl: int = 3000
    osl: int = 150
    load_interval_s: float = 5.0
    throughput_interval_s: float = 180.0
    min_endpoint: int = 1
    max_gpu_budget: int = 8
    prefill_engine_num_gpu: int = 1
    decode_engine_num_gpu: int = 1
    scale_down_sensitivity: float = 0.8
    predictor: str = CONSTANT
    connector: str = VIRTUAL
    enable_load_scaling: bool = True
    enable_throughput_scaling: bool = True
    scaling_ack_timeout_s: float = 1800.0
    profile: PerfProfile | None = None
    warmup_trace: str | None = None
    mode: str = DISAGG


@dataclass(frozen=True)
class DeploymentSpec:
    """What to deploy. ``standby``: workers a check may add later (``add_worker``), not started now.

    An adapter may ignore ``standby``; on a cluster the suite declares them with 0 replicas, so a
    join scales a component up instead of changing the DGD's templates (a new revision, seed 001).
    """

    model: str
    router: RouterSpec = field(default_factory=RouterSpec)
    workers: tuple[WorkerSpec, ...] = ()
    standby: tuple[WorkerSpec, ...] = ()
    namespace: str = "servecert"
    time_scale: float = 0.0
    timing: str = "polynomial"
    planner: PlannerSpec | None = None


@dataclass(frozen=True)
class WorkerRef:
    """A running worker as the suite knows it: the fake engine behind it and its placement."""

    name: str
    engine_id: str
    url: str
    role: str
    domains: Mapping[str, str]


@dataclass(frozen=True)
class EnginePod:
    """One fake engine as a pod, for ``ClusterEnvironment.place_engine_pod``.

    ``name`` is the pod's (and its engine id); ``worker`` and ``spec`` give the engine's parameters
    (``engine_config``'s); ``port`` is where it listens on its pod IP; ``pd_protocol`` the P/D
    handshake it speaks (``PD_VLLM``, ``PD_SGLANG``; None: the suite's own); ``labels`` and
    ``annotations`` go on the pod; ``grace_s`` is its termination grace period.
    """

    name: str
    worker: WorkerSpec
    spec: DeploymentSpec
    port: int
    pd_protocol: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    grace_s: float = 30.0


def cache_root() -> Path:
    """Where the suite and its adapters keep what they build: ``$SERVECERT_CACHE``, else ``~/.cache/servecert``."""
    given = os.environ.get("SERVECERT_CACHE")
    if given:
        return Path(given).expanduser().resolve()
    return Path.home() / ".cache" / "servecert"


@runtime_checkable
class Environment(Protocol):
    """What the suite offers an adapter: fake engines it starts, observes and stops."""

    name: str

    async def start_engine(self, config: EngineConfig) -> WorkerRef: ...

    async def stop_engine(self, ref: WorkerRef, drain_s: float = 0.0) -> None:
        """Stop it; ``drain_s`` > 0 first serves its work in flight, at most that long (a terminating pod)."""
        ...

    def tool(self, name: str) -> Path:
        """A program the suite built for itself (``etcd``, ``kube-apiserver``, ...); AdapterError naming the setup
        command when it is not built."""
        ...


@runtime_checkable
class Deployment(Protocol):
    """A running deployment: the frontend the suite sends OpenAI traffic to, and its workers."""

    frontend_url: str
    workers: list[WorkerRef]

    async def add_worker(self, spec: WorkerSpec) -> WorkerRef: ...

    async def remove_worker(self, ref: WorkerRef) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class LogRecord:
    """One record of what the implementation logged about itself: Python's level name and the message."""

    level: str
    message: str


@runtime_checkable
class LoggingDeployment(Deployment, Protocol):
    """A deployment whose implementation's log the suite can read (seed 000's fallback row: "Log warning").

    ``log_records`` returns every record the implementation's router has logged since the
    deployment started, at WARNING or above, oldest first; level names as Python's ``logging``
    spells them (``WARNING``, ``ERROR``, ``CRITICAL``). An adapter maps its implementation's own
    log onto it (the Dynamo adapter reads its frontend's log file).
    """

    async def log_records(self) -> list[LogRecord]: ...


@runtime_checkable
class PlannedDeployment(Deployment, Protocol):
    """A deployment with a planner on the Virtual connector: the suite reads its decisions and
    acknowledges them after scaling the workers (``add_worker``/``remove_worker``)."""

    decisions: DecisionStore


@runtime_checkable
class Implementation(Protocol):
    metadata: ImplementationMetadata
    supported_features: frozenset[str]

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> Deployment: ...


@runtime_checkable
class TokenIdPrompts(Protocol):
    """A deployment whose frontend is sent prompts as the suite tokenizer's ids (the OpenAI API's integer-array prompt).

    For a frontend whose own tokenizer counts the suite's words differently (the Dynamo adapter's):
    with ``prompt_token_ids`` true, the suite's load generators send ids, so the prompt lengths a
    check sets are the lengths the engines see.
    """

    prompt_token_ids: bool


def sends_token_ids(deployment: object) -> bool:
    """Whether the suite sends ``deployment`` prompts as token ids (``TokenIdPrompts``)."""
    return isinstance(deployment, TokenIdPrompts) and bool(deployment.prompt_token_ids)


# The cluster environment: what an adapter may use of it, and what a cluster implementation provides.


@runtime_checkable
class ClusterEnvironment(Protocol):
    """What an adapter may use of the suite's cluster environment: this case's namespace on the cluster.

    ``api`` is an admin ``kubernetes.client.ApiClient``; ``kubeconfig`` the file a process of the
    adapter's (a router's own discovery) may use; ``pods_dir`` the embedded cluster's per-pod
    directories (None on another cluster); ``cleanups`` runs, newest first, when the case ends.
    """

    name: str
    namespace: str
    cleanups: list[Callable[[], None]]

    @property
    def api(self) -> Any: ...

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def pods_dir(self) -> Path | None: ...

    def tool(self, name: str) -> Path: ...

    async def place_engine_pod(self, pod: EnginePod) -> None:
        """Create ``pod``: a node of its own carrying the worker's domains under the cluster's topology labels (a
        level the worker lacks has no label), and on it a pod of the suite's fake engine with the worker's
        parameters. The node goes when the case ends; the pod is the adapter's to delete (or the namespace's)."""
        ...


@runtime_checkable
class OperatorInstallation(Protocol):
    namespace_prefix: str

    def namespace_labels(self) -> dict[str, str]: ...

    def close(self) -> None: ...


@runtime_checkable
class RestartableOperator(OperatorInstallation, Protocol):
    """An operator the suite can kill mid-rollout and start again (ROLLOUT-ISOLATION's ``RolloutControllerRestart``).

    ``kill`` ends the controller's process at once (SIGKILL or the platform's equivalent) and returns
    once it is gone; ``start_again`` starts it as it was installed and returns once it serves again.
    An adapter that declares the feature returns such an installation from ``install_operator``.
    """

    def kill(self) -> None: ...

    def start_again(self) -> None: ...


@runtime_checkable
class ClusterImplementation(Protocol):
    """An implementation that runs on a cluster: it installs its operator once per session."""

    def install_operator(self, api: Any) -> OperatorInstallation: ...


@dataclass(frozen=True)
class NoOperator:
    """The installation of an implementation that ships no operator (a router with Kubernetes service discovery).

    Its cases' namespaces carry ``namespace_prefix`` and no labels; closing it has nothing to stop.
    """

    namespace_prefix: str

    def namespace_labels(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        return None


@runtime_checkable
class DeploysOnCluster(Protocol):
    """A cluster implementation that deploys a spec itself instead of through a DGD and an operator.

    A router without an operator (vllm-router, sglang-router) runs the spec's workers as labelled
    engine pods and finds them through its own Kubernetes service discovery. The suite calls
    ``deploy_on_cluster`` where it would otherwise write a DGD; the workers stay the suite's fake
    engines, so the same checks judge the engines' ground truth. Like ``deploy``, it closes what it
    started when it fails.
    """

    async def deploy_on_cluster(self, spec: DeploymentSpec, env: ClusterEnvironment) -> Deployment: ...


@runtime_checkable
class RoutingProbe(Protocol):
    """Optional, on a cluster implementation: the engine ids a frontend routes to right now.

    The suite sends a case's traffic only once every frontend of the DGD routes to exactly the
    workers it deployed, so a verdict never depends on how fast discovery was on a busy machine.
    It is a gate, never a verdict: the checks judge the engines' ground truth. ``frontend_url`` is
    one frontend pod's address (``http://<pod IP>:<port>``).
    """

    async def routed_engines(self, session: aiohttp.ClientSession, frontend_url: str) -> set[str]: ...


@runtime_checkable
class ClusterPlanner(Protocol):
    """On a cluster implementation: the DGD component (``type: planner``) that runs its planner for ``spec.planner``.

    Returns the component's ``image``, ``args`` and optionally ``env``; the suite adds name, type and
    replicas. The operator is expected to give its pod ``DYN_PARENT_DGD_K8S_NAME`` (seed 003).
    """

    def planner_component(self, spec: DeploymentSpec) -> dict[str, Any]: ...


def engine_config(spec: WorkerSpec, deployment: DeploymentSpec) -> EngineConfig:
    """The fake engine a worker spec asks for (adapters may adjust it before starting it)."""
    from servecert.fakes import faults, timing
    from servecert.fakes.topology_env import TopologyConfig

    # NB: the seed's level is frontend configuration; a worker carries a transfer policy of its own
    # only when the spec asks for Dynamo's per-worker spelling.
    topo = TopologyConfig(
        enabled=bool(spec.domains) or spec.transfer_enforcement is not None,
        domains=dict(spec.domains),
        transfer_domain=spec.transfer_domain if spec.transfer_enforcement is not None else None,
        enforcement=spec.transfer_enforcement or REQUIRED,
        preferred_weight=spec.preferred_weight,
    )
    return EngineConfig(
        model=deployment.model,
        role=spec.role,
        engine_id=spec.name,
        namespace=deployment.namespace,
        time_scale=deployment.time_scale,
        block_size=spec.block_size,
        context_length=spec.context_length,
        tensor_parallel_size=spec.tensor_parallel_size,
        engine_version=spec.engine_version,
        protocol_version=spec.protocol_version,
        num_gpu_blocks=spec.num_gpu_blocks,
        timing=timing.from_spec(deployment.timing),
        topology=topo,
        heartbeat_seconds=1.0,
        max_num_batched_tokens=spec.max_num_batched_tokens,
        spec_accept_length=spec.spec_accept_length,
        faults=faults.Faults(startup_seconds=_real_seconds(spec.startup_seconds, deployment.time_scale)),
    )


def _real_seconds(simulated: float, time_scale: float) -> float:
    """Simulated seconds as real ones (time scale 0 means no delay at all)."""
    return 0.0 if time_scale <= 0 else simulated / time_scale


def load(name: str) -> Implementation:
    """Find an adapter by entry-point name or ``module:attribute``; raise AdapterError saying how to fix it.

    The attribute is an ``Implementation``, a class of one (instantiated without arguments), or a
    zero-argument callable returning one.
    """
    target: Any
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            target = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise AdapterError(f"cannot load implementation {name!r}: {exc}") from exc
    else:
        found = [ep for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            known = sorted(ep.name for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
            raise AdapterError(
                f"no implementation named {name!r}; registered: {', '.join(known) or 'none'} "
                f"(register one under the entry-point group {ENTRY_POINT_GROUP!r}, or pass module:attribute)"
            )
        try:
            target = found[0].load()
        except ImportError as exc:
            raise AdapterError(f"implementation {name!r} is registered but cannot be imported: {exc}") from exc
    # NB: a class whose metadata and features are class attributes passes isinstance(..., Implementation) unopened.
    impl = target() if isinstance(target, type) or (callable(target) and not isinstance(target, Implementation)) else target
    if not isinstance(impl, Implementation):
        raise AdapterError(f"{name!r} is not an Implementation (needs metadata, supported_features and deploy())")
    return impl
