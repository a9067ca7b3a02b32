"""The reference router's parts: worker sets, KV index, cost formula, topology rows."""

from __future__ import annotations

import math

import pytest

from servecert.protocol.card import ModelCard
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import WorkerInfo
from servecert.reference_impl.frontend.kv_index import KvIndex
from servecert.reference_impl.frontend.router import NoWorkers, Router
from servecert.reference_impl.frontend.routing import KvPolicy, Load, RoundRobinPolicy
from servecert.reference_impl.frontend.worker_sets import WorkerSets


def worker(engine_id: str, role: str = "agg", block_size: int = 16, **domains: str) -> WorkerInfo:
    card = ModelCard(served_model_name="m", block_size=block_size, worker_type=role)
    return WorkerInfo(engine_id, f"http://{engine_id}", "ns", role, card, card.checksum(), "1", {}, domains)


def test_the_first_accepted_card_keeps_the_worker_set() -> None:
    sets = WorkerSets()
    assert sets.add(worker("a", block_size=16))
    assert not sets.add(worker("b", block_size=32))
    assert [w.engine_id for w in sets.for_model("m")] == ["a"]
    [rejection] = sets.rejected.values()
    assert rejection.to_dict()["incumbent_checksum"] == worker("a").checksum
    sets.remove("a")
    assert sets.add(worker("c", block_size=32)), "an empty set forgets its card"


def test_prefill_and_decode_cards_form_separate_sets() -> None:
    sets = WorkerSets()
    assert sets.add(worker("p", role="prefill")) and sets.add(worker("d", role="decode"))


def test_overlap_counts_leading_blocks_held_per_worker() -> None:
    index = KvIndex()
    index.apply({"engine_id": "w1", "kind": "stored", "block_hashes": [1, 2, 3], "event_id": 1})
    index.apply({"engine_id": "w2", "kind": "stored", "block_hashes": [1, 3], "event_id": 1})
    assert index.overlaps([1, 2, 3, 4]) == {"w1": 3, "w2": 1}
    index.apply({"engine_id": "w1", "kind": "removed", "block_hashes": [2], "event_id": 2})
    assert index.overlaps([1, 2, 3]) == {"w1": 1, "w2": 1}
    index.forget("w2")
    assert index.overlaps([1]) == {"w1": 1}


@pytest.mark.parametrize(
    ("isl", "cached_blocks", "expected"),
    [(15, 0, 0.9375), (21, 0, 2.3125), (34, 1, 3.125), (34, 2, 2.125)],
    ids=["15-tokens", "21-tokens", "34-tokens-1-cached", "34-tokens-2-cached"],
)
def test_kv_cost_matches_dynamo_logits_observed_on_idle_workers(isl: int, cached_blocks: int, expected: float) -> None:
    policy = KvPolicy(Load())
    [cost] = policy.costs([worker("w")], isl, {"w": cached_blocks}, {}, decode_leg=False)
    assert cost == pytest.approx(expected)


def test_the_decode_leg_costs_active_blocks_times_the_preferred_multiplier() -> None:
    load = Load()
    load.start("d1", 4.0)
    policy = KvPolicy(load)
    factor = math.exp(-math.tanh(0.85))
    costs = policy.costs([worker("d1", "decode"), worker("d2", "decode")], 64, {}, {"d1": factor}, decode_leg=True)
    assert costs == pytest.approx([4.0 * 0.50104, 0.0], abs=1e-4)


def test_lowest_cost_wins_and_ties_are_spread() -> None:
    policy = KvPolicy(Load())
    workers = [worker("a"), worker("b")]
    assert policy.choose(workers, 64, {"b": 3}, {}, decode_leg=False).engine_id == "b"
    picks = {policy.choose(workers, 64, {}, {}, decode_leg=False).engine_id for _ in range(64)}
    assert picks == {"a", "b"}


def test_round_robin_cycles() -> None:
    rr = RoundRobinPolicy()
    workers = [worker("a"), worker("b")]
    assert [rr.choose(workers, 1, {}, {}, False).engine_id for _ in range(4)] == ["a", "b", "a", "b"]


P0 = worker("p0", "prefill", zone="a")
P1 = worker("p1", "prefill", zone="b")
D_A = worker("da", "decode", zone="a")
D_B = worker("db", "decode", zone="b")
D_NONE = worker("dx", "decode")


def ids(workers: list[WorkerInfo]) -> list[str]:
    return sorted(w.engine_id for w in workers)


def test_seed_row_fail_no_same_domain_raises_naming_level_and_value() -> None:
    with pytest.raises(topology.NoSameDomainDecode, match="zone=a"):
        topology.decode_candidates(topology.TopologyPolicy("zone"), P0, [D_B, D_NONE])


def test_seed_row_fail_excludes_workers_missing_the_level() -> None:
    choice = topology.decode_candidates(topology.TopologyPolicy("zone"), P0, [D_A, D_B, D_NONE])
    assert ids(choice.candidates) == ["da"]


def test_seed_row_fallback_allows_every_decode_worker_only_when_none_match() -> None:
    policy = topology.TopologyPolicy("zone", topology.FALLBACK)
    assert ids(topology.decode_candidates(policy, P0, [D_A, D_B, D_NONE]).candidates) == ["da"]
    choice = topology.decode_candidates(policy, P0, [D_B, D_NONE])
    assert choice.fallback and ids(choice.candidates) == ["db", "dx"]


def test_seed_row_level_unset_filters_nothing() -> None:
    choice = topology.decode_candidates(topology.TopologyPolicy(None), P0, [D_A, D_B, D_NONE])
    assert ids(choice.candidates) == ["da", "db", "dx"] and not choice.fallback


def test_seed_row_prefill_preselection_prefers_prefill_with_same_domain_decode() -> None:
    policy = topology.TopologyPolicy("zone")
    assert ids(topology.eligible_prefill(policy, [P0, P1], [D_A])) == ["p0"]
    assert ids(topology.eligible_prefill(policy, [P0, P1], [D_NONE])) == ["p0", "p1"]


def test_a_bad_mismatch_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="fail or fallback"):
        topology.TopologyPolicy("zone", "maybe")


def test_prefill_workers_without_a_decode_worker_are_no_workers_not_a_crash() -> None:
    """A frontend that sees prefill workers but no decode (one just left) answers 404, which the DGD's proxy retries."""
    sets = WorkerSets()
    assert sets.add(worker("p", role="prefill"))
    router = Router(sets, KvIndex())
    workers = router.workers("m")
    # NB: in the app's order: the request is parsed with the workers' tokenizer first (an IndexError there was a 500)
    assert workers.tokenizer().encode("a b") and workers.context_length() > 0
    with pytest.raises(NoWorkers, match="no decode worker"):
        router.first(workers, [1, 2, 3])
