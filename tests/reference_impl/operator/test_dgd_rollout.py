"""The DGD's rollout plan, simulated: pods appear, become Ready and go as a kubelet and the operator would make them.

``Sim`` applies each ``dgd_rollout.plan`` to a set of pod dicts: created pods start not Ready and
become Ready on the next tick (or stay not Ready when told), deleted pods vanish, drained
frontends vanish too. Every rollout is run to its end and judged on what the seed asks: a new
dynamo namespace with its frontend first, no worker of the new revision before that frontend is
Ready, capacity never below target - maxUnavailable, weights following ready workers, the old
frontend drained last; pause holds; a reverted spec rolls back; the broken in-place variant keeps
one namespace.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from servecert.protocol import kube_names as kn
from servecert.reference_impl.operator import dgd_pods, dgd_rollout, reconcile, rollout_plan
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour

NS = "team"


def dgd(
    block: str = "16",
    frontend_image: str = "servecert/frontend",
    prefill: int = 2,
    decode: int = 2,
    frontends: int = 1,
    **strategy: Any,
) -> dict[str, Any]:
    engine = ["--model", "m", "--block-size", block]
    return {
        "metadata": {"name": "llm", "namespace": NS, "uid": "u1"},
        "spec": {
            "rolloutStrategy": strategy,
            "components": [
                {"name": "frontend", "type": "frontend", "replicas": frontends, "image": frontend_image},
                {"name": "prefill", "type": "prefill", "replicas": prefill, "args": [*engine, "--role", "prefill"]},
                {"name": "decode", "type": "decode", "replicas": decode, "args": [*engine, "--role", "decode"]},
            ],
        },
    }


class Sim:
    def __init__(self, spec: dict[str, Any], behaviour: Behaviour = REFERENCE, lag: dict[str, int] | None = None) -> None:
        self.spec = spec
        self.lag = lag or {}
        """Ticks a new pod of this component takes to become Ready (default: the next tick)."""
        self.born: dict[str, int] = {}
        self.behaviour = behaviour
        self.pods: dict[str, dict[str, Any]] = {}
        self.ip = 0
        self.stuck: set[str] = set()
        self.plans: list[dgd_rollout.Plan] = []
        self.history: list[dict[str, dict[str, Any]]] = []
        self.seen: list[dict[str, dict[str, Any]]] = []
        """The pods each plan was made from."""

    def tick(self) -> dgd_rollout.Plan:
        for pod in self.pods.values():
            name = pod["metadata"]["name"]
            late = len(self.plans) - self.born.get(name, 0) < self.lag.get(pod["metadata"]["labels"][kn.COMPONENT_LABEL], 1)
            if name not in self.stuck and not late:
                pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "podIP": pod["status"]["podIP"]}
        self.seen.append(copy.deepcopy(self.pods))
        plan = dgd_rollout.plan(self.spec, list(self.pods.values()), None, dgd_pods.Images(), self.behaviour)
        for pod in plan.create:
            self.ip += 1
            self.pods[pod["metadata"]["name"]] = {**copy.deepcopy(pod), "status": {"podIP": f"127.0.0.{self.ip}"}}
            self.born[pod["metadata"]["name"]] = len(self.plans) + 1
        for name in plan.delete + plan.drain:
            self.pods.pop(name, None)
        self.plans.append(plan)
        self.history.append(copy.deepcopy(self.pods))
        return plan

    def run(self, ticks: int = 60) -> None:
        for _ in range(ticks):
            plan = self.tick()
            settled = all("conditions" in pod["status"] for pod in self.pods.values())
            if plan.status["phase"] == rollout_plan.COMPLETE and not plan.create and settled:
                return
        raise AssertionError(f"no end after {ticks} ticks: {self.plans[-1].status}")

    def by(self, key: str) -> Counter[tuple[str, str]]:
        return Counter((p["metadata"]["labels"][key], p["metadata"]["labels"][kn.COMPONENT_LABEL]) for p in self.pods.values())


def namespaces(pods: dict[str, dict[str, Any]]) -> set[str]:
    return {p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] for p in pods.values()}


def test_first_deployment_creates_every_pod_at_once_in_one_namespace() -> None:
    sim = Sim(dgd())
    plan = sim.tick()
    assert Counter(p["metadata"]["labels"][kn.COMPONENT_LABEL] for p in plan.create) == {"frontend": 1, "prefill": 2, "decode": 2}
    sim.run()
    assert namespaces(sim.pods) == {dgd_pods.dynamo_namespace(dgd())}
    assert list(sim.plans[-1].weights.values()) == [256]


def rolled(sim: Sim, new_spec: dict[str, Any]) -> tuple[str, str]:
    old_ns = dgd_pods.dynamo_namespace(sim.spec)
    sim.spec = new_spec
    return old_ns, dgd_pods.dynamo_namespace(new_spec)


def test_a_worker_change_gets_a_new_namespace_with_its_frontend_first() -> None:
    sim = Sim(dgd())
    sim.run()
    old_ns, new_ns = rolled(sim, dgd(block="32"))
    assert old_ns != new_ns
    first = sim.tick()
    created = [(p["metadata"]["labels"][kn.COMPONENT_LABEL], p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL]) for p in first.create]
    assert created == [("frontend", new_ns)]
    sim.run()
    assert namespaces(sim.pods) == {new_ns}
    for state in sim.history:
        new_frontend_ready = any(
            p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] == "frontend"
            and p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns
            and "conditions" in p["status"]
            for p in state.values()
        )
        new_workers = [
            p
            for p in state.values()
            if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns
            and "args" in p["spec"]["containers"][0]
            and p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] != "frontend"
        ]
        assert new_frontend_ready or not new_workers


def test_capacity_never_drops_below_target_minus_max_unavailable_and_weights_follow_ready_workers() -> None:
    sim = Sim(dgd(prefill=3, decode=2))
    sim.run()
    start = len(sim.plans)
    _, new_ns = rolled(sim, dgd(block="32", prefill=3, decode=2))
    sim.run()
    for state in sim.history[start:]:
        ready = Counter(p["metadata"]["labels"][kn.COMPONENT_LABEL] for p in state.values() if "conditions" in p["status"])
        assert ready["prefill"] >= 3 and ready["decode"] >= 2, ready
    weights = [plan.status["weights"] for plan in sim.plans[start:]]
    shares = [sum(e["weight"] for e in ws if new_ns[-6:] in e["frontend"]) / max(1, sum(e["weight"] for e in ws)) for ws in weights if ws]
    assert shares == sorted(shares), shares  # NB: the new side's share only grows during a forward rollout
    assert shares[-1] == 1.0


def new_shares(behaviour: Behaviour) -> list[float]:
    """The new set's weight share at every plan of a 4:4 rollout, deduplicated in order."""
    sim = Sim(dgd(prefill=4, decode=4), behaviour)
    sim.run()
    start = len(sim.plans)
    _, new_ns = rolled(sim, dgd(block="32", prefill=4, decode=4))
    sim.run()
    out: list[float] = []
    for plan in sim.plans[start:]:
        total = sum(plan.weights.values())
        share = round(sum(w for name, w in plan.weights.items() if new_ns[-6:] in name) / total, 2) if total else 0.0
        if not out or out[-1] != share:
            out.append(share)
    return out


def test_the_broken_splits_depart_from_the_ready_ratio_each_its_own_way() -> None:
    assert new_shares(REFERENCE) == [0.0, 0.25, 0.5, 0.75, 1.0]  # NB: workers the step deletes are not counted
    assert new_shares(Behaviour(split="even")) == [0.0, 0.5, 1.0]
    assert new_shares(Behaviour(split="switch")) == [0.0, 1.0]
    assert new_shares(Behaviour(weight_lag_workers=2)) == [0.0, 0.5, 1.0]  # NB: 0 until 3 of 4 are ready, then 2 vs 2
    with pytest.raises(ValueError, match="must be one of"):
        Behaviour(split="random")


def most_pods_and_first_workers(behaviour: Behaviour) -> tuple[int, bool]:
    """Over a 4:2 rollout: the most prefill pods at once, and whether a new worker came before the new frontend was Ready."""
    sim = Sim(dgd(prefill=4, decode=2), behaviour)
    sim.run()
    start = len(sim.plans)
    _, new_ns = rolled(sim, dgd(block="32", prefill=4, decode=2))
    sim.run()
    most, early = 0, False
    for state in sim.history[start:]:
        most = max(most, sum(1 for p in state.values() if p["metadata"]["labels"][kn.COMPONENT_LABEL] == "prefill"))
        mine = [p for p in state.values() if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns]
        frontend_ready = any(p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] == "frontend" and "conditions" in p["status"] for p in mine)
        early = early or (not frontend_ready and any(p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] != "frontend" for p in mine))
    return most, early


def test_the_broken_steps_break_only_their_own_rule() -> None:
    assert most_pods_and_first_workers(REFERENCE) == (5, False)
    assert most_pods_and_first_workers(Behaviour(honour_max_surge=False)) == (8, False)
    assert most_pods_and_first_workers(Behaviour(workers_after_frontend=False)) == (5, True)


def new_frontends_at_first_worker_and_end(behaviour: Behaviour) -> tuple[int, int]:
    """Over a 4:2 rollout with 3 frontends: the new namespace's frontend pods when its first worker appears, and at the end."""
    sim = Sim(dgd(prefill=4, decode=2, frontends=3), behaviour)
    sim.run()
    start = len(sim.plans)
    _, new_ns = rolled(sim, dgd(block="32", prefill=4, decode=2, frontends=3))
    sim.run()
    at_first_worker = None
    for state in sim.history[start:]:
        mine = [
            p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL]
            for p in state.values()
            if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns
        ]
        if at_first_worker is None and any(kind != "frontend" for kind in mine):
            at_first_worker = mine.count("frontend")
    final = [p for p in sim.history[-1].values() if p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] == "frontend"]
    assert at_first_worker is not None
    return at_first_worker, len(final)


def test_the_new_frontend_matches_the_old_replica_count_before_any_new_worker() -> None:
    assert new_frontends_at_first_worker_and_end(REFERENCE) == (3, 3)
    assert new_frontends_at_first_worker_and_end(Behaviour(full_new_frontend=False)) == (1, 3)


def test_the_old_frontend_drains_only_after_its_workers_are_gone() -> None:
    sim = Sim(dgd())
    sim.run()
    old_ns, _ = rolled(sim, dgd(block="32"))
    sim.run()
    for plan, before in zip(sim.plans[1:], sim.history, strict=False):
        for name in plan.drain:
            assert name in before
            old_workers = [
                p
                for p in before.values()
                if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == old_ns
                and p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] != "frontend"
            ]
            assert not old_workers, (name, sorted(p["metadata"]["name"] for p in old_workers))


def weight_must_stay_on_frontends_that_serve(sim: Sim, start: int) -> None:
    """From tick ``start`` on, every plan weights some frontend, and only frontends whose workers revision has a
    ready worker of every component that the plan keeps (else the proxy answers 503 or the frontend 404)."""
    for i in range(start, len(sim.plans)):
        plan, pods = sim.plans[i], sim.seen[i]
        assert any(w > 0 for w in plan.weights.values()), (i, plan.status)
        kept = [p for n, p in pods.items() if n not in plan.delete and "conditions" in p["status"]]
        for name, weight in plan.weights.items():
            revision = dgd_pods.pod_revisions(pods[name]).workers
            components = {
                p["metadata"]["labels"][kn.COMPONENT_LABEL]
                for p in kept
                if dgd_pods.pod_revisions(p).workers == revision and p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] != "frontend"
            }
            assert weight == 0 or components == {"prefill", "decode"}, (i, name, weight, components, plan.status)


@pytest.mark.parametrize("lag", [{}, {"decode": 3}, {"prefill": 4}], ids=["even", "slow-decode", "slow-prefill"])
@pytest.mark.parametrize("revert_after", [None, *range(1, 9)])
def test_weight_stays_on_serving_frontends_through_a_rollout_and_any_rollback(revert_after: int | None, lag: dict[str, int]) -> None:
    sim = Sim(dgd(), lag=lag)
    sim.run(ticks=120)
    start = len(sim.plans)
    rolled(sim, dgd(block="32"))
    if revert_after is not None:
        for _ in range(revert_after):
            sim.tick()
        sim.spec = dgd()
    sim.run(ticks=120)
    weight_must_stay_on_frontends_that_serve(sim, start)


def test_weight_stays_on_serving_frontends_through_a_frontend_only_rollout() -> None:
    sim = Sim(dgd())
    sim.run()
    start = len(sim.plans)
    sim.spec = dgd(frontend_image="servecert/frontend:2")
    sim.run()
    weight_must_stay_on_frontends_that_serve(sim, start)


def test_paused_holds_every_count() -> None:
    sim = Sim(dgd())
    sim.run()
    rolled(sim, dgd(block="32"))
    for _ in range(4):
        sim.tick()
    sim.spec = dgd(block="32", paused=True)
    held = sorted(sim.pods)
    for _ in range(5):
        plan = sim.tick()
        assert plan.status["phase"] == rollout_plan.PAUSED
        assert not plan.create and not plan.delete
    assert sorted(sim.pods) == held
    sim.spec = dgd(block="32")
    sim.run()


def test_reverting_the_spec_mid_way_rolls_back_to_the_old_namespace() -> None:
    sim = Sim(dgd())
    sim.run()
    old_ns, new_ns = rolled(sim, dgd(block="32"))
    for _ in range(5):
        sim.tick()
    assert new_ns in namespaces(sim.pods)
    sim.spec = dgd()
    sim.run()
    assert namespaces(sim.pods) == {old_ns}


def test_a_frontend_only_change_moves_frontend_and_workers_to_a_new_namespace_frontend_first() -> None:
    """Seed 001 4.1.1 T1-T5: the new frontend in namespace B first, the workers' DYN_NAMESPACE set to B (they roll),
    "Final State: Frontend + Workers in NS B"."""
    sim = Sim(dgd())
    sim.run()
    workers = sorted(n for n, p in sim.pods.items() if "frontend" not in n)
    old_ns, new_ns = rolled(sim, dgd(frontend_image="servecert/frontend:2"))
    assert old_ns != new_ns
    first = sim.tick()
    assert [p["metadata"]["labels"][kn.COMPONENT_LABEL] for p in first.create] == ["frontend"]
    sim.run()
    assert namespaces(sim.pods) == {new_ns}
    assert not set(workers) & set(sim.pods), "every worker of the end state is a new pod"
    [frontend] = [p for p in sim.pods.values() if p["metadata"]["labels"][kn.COMPONENT_TYPE_LABEL] == "frontend"]
    assert frontend["spec"]["containers"][0]["image"] == "servecert/frontend:2"


def test_a_new_frontend_that_never_becomes_ready_holds_the_workers() -> None:
    sim = Sim(dgd())
    sim.run()
    rolled(sim, dgd(block="32"))
    plan = sim.tick()
    sim.stuck = {plan.create[0]["metadata"]["name"]}
    for _ in range(6):
        plan = sim.tick()
        assert not plan.create and not plan.delete
        assert plan.status["phase"] == rollout_plan.WAITING_FOR_FRONTEND


def test_the_in_place_variant_keeps_one_namespace() -> None:
    sim = Sim(dgd(), Behaviour(isolate_rollouts=False))
    sim.run()
    sim.spec = dgd(block="32")
    sim.run()
    assert namespaces(sim.pods) == {f"{NS}-llm"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [({}, (1, 0)), ({"maxSurge": "50%", "maxUnavailable": "50%"}, (1, 1)), ({"maxSurge": 0, "maxUnavailable": 0}, (1, 0))],
)
def test_strategy_reads_counts_and_percentages(raw: dict[str, Any], expected: tuple[int, int]) -> None:
    strategy = dgd_rollout.strategy(dgd(**raw))
    assert (strategy.max_surge, strategy.max_unavailable) == expected


def test_the_broken_variants_each_break_their_rule() -> None:
    """tests/nonconforming/rollout.py's operators, simulated: each breaks exactly the rule its name says."""
    ignores_pause = Sim(dgd(), Behaviour(honour_pause=False))
    ignores_pause.run()
    ignores_pause.spec = dgd(block="32", paused=True)
    assert any(p.create or p.delete for p in (ignores_pause.tick() for _ in range(4)))

    scales_down_first = Sim(dgd())
    scales_down_first.run()
    start = len(scales_down_first.plans)
    scales_down_first.behaviour = Behaviour(honour_max_unavailable=False)
    scales_down_first.spec = dgd(block="32")
    scales_down_first.run()
    ready = [
        Counter(p["metadata"]["labels"][kn.COMPONENT_LABEL] for p in state.values() if "conditions" in p["status"])
        for state in scales_down_first.history[start:]
    ]
    assert any(r["prefill"] < 2 or r["decode"] < 2 for r in ready), ready

    old_frontend_first = Sim(dgd(), Behaviour(new_frontend_first=False))
    old_frontend_first.run()
    old_frontend_first.spec = dgd(frontend_image="servecert/frontend:2")
    plan = old_frontend_first.tick()
    assert plan.drain and not plan.weights.get(plan.create[0]["metadata"]["name"]), "the old frontend drains before the new one is up"

    joins_old_workers = Sim(dgd(), Behaviour(frontend_rolls_workers=False))
    joins_old_workers.run()
    workers = sorted(n for n in joins_old_workers.pods if "frontend" not in n)
    joins_old_workers.spec = dgd(frontend_image="servecert/frontend:2")
    joins_old_workers.run()
    assert sorted(n for n in joins_old_workers.pods if "frontend" not in n) == workers, "the new frontend serves through old workers"
    assert len(namespaces(joins_old_workers.pods)) == 1


@pytest.mark.parametrize(
    ("proxy_note", "ready", "reason"),
    [
        (reconcile.WEIGHTS_APPLIED, "True", "ComponentsReady"),
        ("the traffic proxy is not ready yet", "False", "ProxyNotRouting"),
        ("the traffic proxy did not take the weights: timed out", "False", "ProxyNotRouting"),
    ],
)
def test_ready_means_the_proxy_routes_to_the_ready_pods(proxy_note: str, ready: str, reason: str) -> None:
    """Every pod Ready is not a serving DGD: its address answers 503 until the proxy has a weighted frontend."""
    sim = Sim(dgd())
    sim.run()
    plan = sim.tick()
    proxy = {"status": {"podIP": "127.0.0.99"}}
    status = reconcile.Reconciler._dgd_status(sim.spec, list(sim.pods.values()), plan, proxy, proxy_note)
    [condition] = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert (condition["status"], condition["reason"]) == (ready, reason), status


def _ready(pods: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**p, "status": {"conditions": [{"type": "Ready", "status": "True"}], "podIP": p["status"]["podIP"]}} for p in pods.values()]


def test_a_new_worker_counts_for_the_steps_only_once_the_new_frontend_has_found_it() -> None:
    """At 2:2 with maxSurge 0 / maxUnavailable 1, the old set's last prefill and decode go once the new ones serve:
    Ready pods are not enough while the new frontend has not found them (its discovery polls)."""
    sim = Sim(dgd())
    sim.run()
    old_ns, new_ns = rolled(sim, dgd(block="32", maxSurge=0, maxUnavailable=1))
    for _ in range(10):  # NB: until the old and the new set each have one prefill and one decode
        sim.tick()
        if sorted(sim.by(kn.DYNAMO_NAMESPACE_LABEL).values()) == [1, 1, 1, 1, 1, 1]:
            break
    pods = _ready(sim.pods)
    frontend = next(p["metadata"]["name"] for p in pods if p["metadata"]["labels"][kn.COMPONENT_LABEL] == "frontend"
                    and p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns)  # fmt: skip
    new_ips = frozenset(p["status"]["podIP"] for p in pods if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == new_ns)
    wanted = new_ips - {sim.pods[frontend]["status"]["podIP"]}
    assert dgd_rollout.routing_frontends(sim.spec, pods) == ({frontend: sim.pods[frontend]["status"]["podIP"]}, wanted)
    old_workers = {n for n, p in sim.pods.items() if p["metadata"]["labels"][kn.DYNAMO_NAMESPACE_LABEL] == old_ns} - {
        n for n, p in sim.pods.items() if p["metadata"]["labels"][kn.COMPONENT_LABEL] == "frontend"
    }

    def deleted(routes: dict[str, frozenset[str]]) -> set[str]:
        return set(dgd_rollout.plan(sim.spec, pods, None, dgd_pods.Images(), REFERENCE, routes).delete)

    assert deleted({frontend: new_ips}) == old_workers
    assert deleted({frontend: frozenset()}) == set(), "the new frontend has found no new worker yet"
    assert deleted({}) == set(), "the new frontend did not answer"
    assert set(dgd_rollout.plan(sim.spec, pods, None, dgd_pods.Images()).delete) == old_workers, "routes=None: pod readiness alone"


def _a_set_serves(pods: dict[str, dict[str, Any]]) -> bool:
    """Some dynamo namespace has a Ready prefill and a Ready decode."""
    ready: dict[str, set[str]] = {}
    for p in pods.values():
        labels = p["metadata"]["labels"]
        if "conditions" in p["status"] and labels[kn.COMPONENT_LABEL] in ("prefill", "decode"):
            ready.setdefault(labels[kn.DYNAMO_NAMESPACE_LABEL], set()).add(labels[kn.COMPONENT_LABEL])
    return any(roles == {"prefill", "decode"} for roles in ready.values())


@pytest.mark.parametrize("slower", ["prefill", "decode"])
def test_a_set_keeps_every_component_throughout_a_rollout_with_max_unavailable_1(slower: str) -> None:
    """At 2:2 with maxSurge 0 / maxUnavailable 1 and one role loading 3 ticks longer, the old set keeps its last worker of
    the other role until the new set has both: else neither set has both, and the weights fall back to an even split
    (a frontend with a decode alone serves it, one with a prefill alone cannot; the suite's CI saw both)."""
    sim = Sim(dgd(), lag={slower: 3})
    sim.run()
    start = len(sim.history)
    sim.spec = dgd(block="32", maxSurge=0, maxUnavailable=1)
    sim.run()
    assert all(_a_set_serves(state) for state in sim.seen[start:])
