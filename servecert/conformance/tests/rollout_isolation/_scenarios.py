"""ROLLOUT-ISOLATION's scenarios: the suite's DGD, the changes seed 001 names, and how to tell a pod's version.

A scenario is data: the seed 001 failure mode it exercises (its failure messages start with it),
the change to the DGD's spec, and how to read from a pod's own container spec (the argument,
env or image tag the change touched) whether it runs the new version — never from the
implementation's labels or status. ``servecert.conformance.tests.rollout_isolation._verdict`` judges a rollout with it,
``servecert.conformance.tests.rollout_isolation._checks`` drives one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from servecert.protocol import kube_names as kn

MODEL = "servecert-model"
DGD_NAME = "rollme"
PREFILL, DECODE = 2, 2
TARGETS: Mapping[str, int] = MappingProxyType({"prefill": PREFILL, "decode": DECODE})
"""Worker replicas by role (the engine's ``--role``): the suite's disaggregated DGD."""
AGGREGATED = 4
AGG_TARGETS: Mapping[str, int] = MappingProxyType({"agg": AGGREGATED})
"""Seed 001's own example (4.3.1: NS A 4 workers, then 3:1 -> weights 75/25): one aggregated worker set of four."""
SEED_EXAMPLE_TARGETS: Mapping[str, int] = MappingProxyType({"prefill": 4, "decode": 2})
"""Seed 001 4.1.2's example DGD (Prefill 4, Decode 2)."""
SPLIT_STARTUP_S = 10.0
"""Model-load time of the split scenario's engines: each ready ratio holds ~11 s."""
SPLIT_DRAIN_QUIET_S = 12.0
"""How long the split scenario's workers stay up, idle, after withdrawing on SIGTERM (as a preStop sleep keeps a pod): a
deleted old worker is Terminating, its Ready condition still True, through most of the next ratio phase, so weights that
count it (its pod is not yet gone) stay a step behind for ~12 s, not the ~1.5 s a prompt exit takes (inside the 2 s follow
allowance). The suite's number; seed 001 names no drain time."""
SPLIT_MAX_TOKENS = 3
"""Tokens a request of the split scenario asks for: ~0.15 s a stream, so ~60 requests a second at CONCURRENCY."""
PAUSE_STARTUP_S = 5.0
"""Model-load time of the pause scenario's engines: longer than the settle the suite allows after the pause
(``rollout_pause_settle_s``, at most 2 s) plus its polling, so an operator that ignores the pause cannot take the
rollout's remaining steps before the suite counts the pods. Without it (CI70), new workers Ready in about a second let
``IgnoresPause`` finish the 2:2 rollout inside the settle, and pass: a verdict only a slow machine gave."""
ENGINE_TIMING = "constant:40:30"
"""Each request streams for ~0.5 s, so streams are in flight through every step."""
CONCURRENCY = 12
"""Streams in flight at once: ~24 requests a second, so even a rollout over in 2 s (a frontend-only one
that ends the old frontend as soon as the new is Ready) serves enough requests to judge the traffic
split (``_verdict``'s 20); with 4, such a rollout served 12-16."""
MAX_TOKENS = 12
"""Tokens a request asks for: at ENGINE_TIMING's 30 ms a token, ~0.5 s a stream."""

MDC = "seed 001 3.1 (MDC checksum)"
KV_LAYOUT = "seed 001 3.2 (KV cache layout)"
RUNTIME_API = "seed 001 3.3 (runtime API)"
FRONTEND = "frontend rollout"
PAUSE = "pause and resume"
ROLLBACK = "rollback"
RESTART = "controller restart"
PROXY_LOSS = "proxy replica loss"
SPLIT = "seed 001 4.3 (traffic split)"

_COMPONENT = {"prefill": ("prefill", "prefill"), "decode": ("decode", "decode"), "agg": ("worker", "worker")}
"""Engine role -> (component name, DGD component type)."""


def base_dgd(
    name: str = DGD_NAME,
    targets: Mapping[str, int] = TARGETS,
    engine_args: tuple[str, ...] = (),
    frontends: int = 1,
    strategy: tuple[int, int] = (1, 0),
) -> dict[str, Any]:
    """The suite's DGD: ``frontends`` frontends and a worker set per role of ``targets`` (1 + 2 prefill + 2 decode by default),
    rolled with ``strategy`` = (maxSurge, maxUnavailable)."""
    engine = ["--model", MODEL, "--timing", ENGINE_TIMING, "--block-size", "16", "--tensor-parallel-size", "1", "--protocol-version", "1"]
    workers = [
        {"name": _COMPONENT[role][0], "type": _COMPONENT[role][1], "replicas": n, "image": "servecert/fake-engine:1.6.1",
         "args": [*engine, *engine_args, "--role", role]}
        for role, n in targets.items()
    ]  # fmt: skip
    return {
        "apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}",
        "kind": kn.DGD_KIND,
        "metadata": {"name": name},
        "spec": {
            "rolloutStrategy": {"maxSurge": strategy[0], "maxUnavailable": strategy[1]},
            "components": [
                {"name": "frontend", "type": "frontend", "replicas": frontends, "image": "servecert/frontend:1.6.1", "args": [],
                 "env": []},
                *workers,
            ],
        },
    }  # fmt: skip


def set_arg(dgd: dict[str, Any], flag: str, value: str) -> None:
    for component in dgd["spec"]["components"]:
        args = component["args"]
        if flag in args:
            args[args.index(flag) + 1] = value


def _value_after(items: Sequence[str], flag: str) -> str | None:
    return items[items.index(flag) + 1] if flag in items and items.index(flag) + 1 < len(items) else None


def arg(pod: Mapping[str, Any], flag: str) -> str | None:
    return _value_after(list(_container(pod).get("args") or []), flag)


def _container(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return dict(containers[0])


def ctype(pod: Mapping[str, Any]) -> str:
    """frontend / prefill / decode from the container's own command line (the suite's images), or ''."""
    image = str(_container(pod).get("image", ""))
    if image.startswith("servecert/frontend"):
        return "frontend"
    if image.startswith("servecert/fake-engine"):
        return arg(pod, "--role") or ""
    return ""


@dataclass(frozen=True)
class Scenario:
    mode: str
    change: Callable[[dict[str, Any]], None]
    new_worker: Callable[[Mapping[str, Any]], bool] | None
    """Whether a worker pod runs the changed version (its container spec); None: their spec does not change (see
    ``frontend_only``)."""
    new_frontend: Callable[[Mapping[str, Any]], bool] | None = None
    """The same for frontend pods; None: their spec does not change (their version is the workers they talk to)."""
    targets: Mapping[str, int] = field(default_factory=lambda: TARGETS)
    """Worker replicas by engine role in the DGD this scenario rolls."""
    engine_args: tuple[str, ...] = ()
    """Extra arguments of every engine of that DGD (e.g. a model-load time)."""
    frontends: int = 1
    """Frontend replicas of that DGD."""
    max_surge: int = 1
    max_unavailable: int = 0
    """Its ``spec.rolloutStrategy`` (seed 001 4.1.2 assumes 1 and 0)."""
    shape: Callable[[dict[str, Any]], None] | None = None
    """Reshapes the suite's DGD before it is deployed (e.g. the block size moved from args to env)."""
    concurrency: int = CONCURRENCY
    """Streams the suite keeps in flight through the rollout."""
    max_tokens: int = MAX_TOKENS
    """Tokens each of its requests asks for: fewer, more requests a second at the same concurrency."""
    frontend_only: bool = False
    """Only the frontend's spec changes, yet the workers roll too: seed 001 4.1 creates the new frontend "with a new
    DYN_NAMESPACE B" and sets "DYN_NAMESPACE = NS B" on the workers (T3), ending in "Frontend + Workers in NS B". A
    worker's version is then whether it is a pod the change created (``after``)."""

    def dgd(self) -> dict[str, Any]:
        out = base_dgd(
            targets=self.targets,
            engine_args=self.engine_args,
            frontends=self.frontends,
            strategy=(self.max_surge, self.max_unavailable),
        )
        if self.shape is not None:
            self.shape(out)
        return out

    def after(self, existing: frozenset[str]) -> Scenario:
        """The scenario as judged once its change is made, ``existing`` the uids of the pods there before it: a
        frontend-only change's new workers are the pods it created."""
        if not self.frontend_only:
            return self
        return replace(self, new_worker=lambda pod: pod["metadata"]["uid"] not in existing)

    def version(self, pod: Mapping[str, Any]) -> bool | None:
        """True: new, False: old, None: a kind of pod whose spec the scenario does not change."""
        kind = ctype(pod)
        test = self.new_frontend if kind == "frontend" else self.new_worker
        return None if test is None or not kind else test(pod)

    def is_new(self, pod: Mapping[str, Any]) -> bool:
        return self.version(pod) is True


def block_size_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--block-size", "32")


BLOCK_SIZE_ENV = "SERVECERT_ENGINE_BLOCK_SIZE"
"""The fake engine reads any option from ``SERVECERT_ENGINE_<OPTION>`` (``servecert.fakes.serve.env_defaults``)."""


def block_size_in_env(dgd: dict[str, Any]) -> None:
    """Workers get their block size from the env, not their args."""
    for component in dgd["spec"]["components"]:
        args = component["args"]
        if "--block-size" in args:
            at = args.index("--block-size")
            component["env"] = [{"name": BLOCK_SIZE_ENV, "value": args[at + 1]}]
            del args[at : at + 2]


def env_block_size_change(dgd: dict[str, Any]) -> None:
    for component in dgd["spec"]["components"]:
        for var in component.get("env") or []:
            if var["name"] == BLOCK_SIZE_ENV:
                var["value"] = "32"


ENGINE_ENTRYPOINT = ("servecert", "engine", "serve")
"""The fake engine image's program: a container ``command`` names it, then options of its own."""


def block_size_in_command(dgd: dict[str, Any]) -> None:
    """Workers get their block size from their container's command (the image's program and one option), not their args."""
    for component in dgd["spec"]["components"]:
        args = component["args"]
        if "--block-size" in args:
            at = args.index("--block-size")
            component["command"] = [*ENGINE_ENTRYPOINT, "--block-size", args[at + 1]]
            del args[at : at + 2]


def command_block_size_change(dgd: dict[str, Any]) -> None:
    for component in dgd["spec"]["components"]:
        command = component.get("command") or []
        if "--block-size" in command:
            command[command.index("--block-size") + 1] = "32"


def command_arg(pod: Mapping[str, Any], flag: str) -> str | None:
    return _value_after(list(_container(pod).get("command") or []), flag)


def env(pod: Mapping[str, Any], name: str) -> str | None:
    return next((str(v.get("value")) for v in _container(pod).get("env") or [] if v.get("name") == name), None)


def tensor_parallel_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--tensor-parallel-size", "2")


def runtime_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--protocol-version", "2")
    for component in dgd["spec"]["components"]:
        component["image"] = component["image"].replace(":1.6.1", ":1.7.0")
        if component["type"] == "frontend":
            component["env"] = [{"name": "DYN_RUNTIME_PROTOCOL_VERSION", "value": "2"}]


def frontend_change(dgd: dict[str, Any]) -> None:
    dgd["spec"]["components"][0]["image"] = "servecert/frontend:1.7.0"


def _image_tag(pod: Mapping[str, Any]) -> str:
    return str(_container(pod).get("image", "")).rpartition(":")[2]


def _new_tag(pod: Mapping[str, Any]) -> bool:
    return _image_tag(pod) == "1.7.0"


def loading(seconds: float) -> tuple[str, ...]:
    """Engine arguments for a model that loads this long before the engine is Ready (``servecert engine serve``)."""
    return ("--startup-seconds", f"{seconds:g}")


BLOCK_SIZE = Scenario(MDC, block_size_change, lambda p: arg(p, "--block-size") == "32")
ENV_BLOCK_SIZE = Scenario(MDC, env_block_size_change, lambda p: env(p, BLOCK_SIZE_ENV) == "32", shape=block_size_in_env)
COMMAND_BLOCK_SIZE = Scenario(MDC, command_block_size_change, lambda p: command_arg(p, "--block-size") == "32", shape=block_size_in_command)
BLOCK_SIZE_CASES: Mapping[str, Scenario] = MappingProxyType({"args": BLOCK_SIZE, "env": ENV_BLOCK_SIZE, "command": COMMAND_BLOCK_SIZE})
"""RolloutBlockSize's cases: seed 001 2's worker changes to "command, args, or environment variables"."""
PAUSED_BLOCK_SIZE = Scenario(PAUSE, block_size_change, BLOCK_SIZE.new_worker, engine_args=loading(PAUSE_STARTUP_S))
"""RolloutPauseResume's rollout: the block size, each engine loading its model for ``PAUSE_STARTUP_S``."""
TENSOR_PARALLEL = Scenario(KV_LAYOUT, tensor_parallel_change, lambda p: arg(p, "--tensor-parallel-size") == "2")
RUNTIME = Scenario(RUNTIME_API, runtime_change, _new_tag, _new_tag)
FRONTEND_IMAGE = Scenario(FRONTEND, frontend_change, None, _new_tag, frontend_only=True)
STEPS = "seed 001 4.1.2 (rollout steps)"
STEPS_STARTUP_S = 3.0
"""Model-load time of RolloutSteps' engines: a step lasts longer than ``rollout_ratio_grace_s`` (1 s), so a ratio broken
for a step or two is judged whatever the machine's speed. Without it (CI71), workers Ready in about a second made
``IgnoresRatio``'s two steps with two prefill and no decode shorter than the grace, and it passed."""
_STEPS_LOAD = loading(STEPS_STARTUP_S)
STEP_CASES: Mapping[str, Scenario] = MappingProxyType(
    {
        # NB: seed 001 4.1.2's own diagram: Prefill 4, Decode 2, a new frontend of 3 replicas, maxSurge 1, maxUnavailable 0.
        "seed-example": Scenario(
            STEPS, block_size_change, BLOCK_SIZE.new_worker, targets=SEED_EXAMPLE_TARGETS, frontends=3, engine_args=_STEPS_LOAD
        ),
        "surge-2": Scenario(
            STEPS, block_size_change, BLOCK_SIZE.new_worker, targets={"prefill": 3, "decode": 1}, max_surge=2, engine_args=_STEPS_LOAD
        ),
        # NB: seed 001 (Grove): "the same as Deployment RollingUpdate where maxSurge is 0 and maxUnavailable is 1".
        "unavailable-1": Scenario(STEPS, block_size_change, BLOCK_SIZE.new_worker, max_surge=0, max_unavailable=1, engine_args=_STEPS_LOAD),
    }
)
"""RolloutSteps' cases: targets, frontend replicas and rollout strategy away from the defaults."""
_SPLIT_ENGINES = (*loading(SPLIT_STARTUP_S), "--drain-quiet-seconds", f"{SPLIT_DRAIN_QUIET_S:g}")
AGGREGATED_SPLIT = Scenario(
    SPLIT, block_size_change, BLOCK_SIZE.new_worker, targets=AGG_TARGETS, engine_args=_SPLIT_ENGINES, max_tokens=SPLIT_MAX_TOKENS
)
DISAGGREGATED_SPLIT = Scenario(
    SPLIT, block_size_change, BLOCK_SIZE.new_worker, targets=SEED_EXAMPLE_TARGETS, engine_args=_SPLIT_ENGINES, max_tokens=SPLIT_MAX_TOKENS
)
"""Seed 001 4.1.2's Prefill 4 / Decode 2 under the split scenario's loads: the ratio counts both roles' workers, so weights
from one role's counts (decode: 1 of 2 new where the formula gives 2 of 6) are a phase apart from it."""
SPLIT_CASES: Mapping[str, Scenario] = MappingProxyType({"seed-example": AGGREGATED_SPLIT, "prefill-4-decode-2": DISAGGREGATED_SPLIT})
"""RolloutTrafficSplit's cases: seed 001 4.3.1's own four aggregated workers, and 4.1.2's 4:2 disaggregated set."""
