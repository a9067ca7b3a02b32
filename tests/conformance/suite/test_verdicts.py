"""The runner's verdicts: which tests are collected for a profile, and which run or are skipped why."""

from __future__ import annotations

import pytest

from servecert import features
from servecert.conformance.suite import profiles, runner
from servecert.conformance.suite.runner import Verdict
from servecert.conformance.suite.test_case import Case
from tests.conformance.suite import suite_helpers

CORE = profiles.ROUTER_TOPOLOGY.core
ALL = features.names()


@pytest.mark.parametrize(
    ("declaration", "options", "verdict", "reason_part"),
    [
        ({}, runner.RunOptions(supported_features=ALL), Verdict.RUN, ""),
        (
            {"feature_names": (features.KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT, features.DISAGGREGATED_SERVING)},
            runner.RunOptions(supported_features=CORE),
            Verdict.NOT_SUPPORTED,
            "KVTransferTopologyPreferredWeight",
        ),
        ({}, runner.RunOptions(supported_features=ALL, skip_tests=frozenset({"Example"})), Verdict.SKIPPED, "--skip-tests"),
        ({}, runner.RunOptions(supported_features=ALL, skip_tests=frozenset({"Example[default]"})), Verdict.SKIPPED, "--skip-tests"),
        ({}, runner.RunOptions(supported_features=ALL, run_tests=frozenset({"Other"})), Verdict.SKIPPED, "--run-test"),
        ({"provisional": True}, runner.RunOptions(supported_features=ALL), Verdict.PROVISIONAL_SKIPPED, "--include-provisional"),
        ({"provisional": True}, runner.RunOptions(supported_features=ALL, include_provisional=True), Verdict.RUN, ""),
        (
            {"environments": frozenset({"cluster"})},
            runner.RunOptions(supported_features=ALL),
            Verdict.WRONG_ENVIRONMENT,
            "runs only in: cluster; this run uses process",
        ),
    ],
    ids=[
        "supported-runs",
        "unsupported-feature-is-not-supported",
        "skip-tests-by-name",
        "skip-tests-by-case",
        "run-test-elsewhere-skips",
        "provisional-is-skipped",
        "provisional-runs-when-included",
        "cluster-only-is-wrong-environment",
    ],
)
def test_each_test_gets_a_verdict_before_it_runs(
    declaration: dict[str, object], options: runner.RunOptions, verdict: Verdict, reason_part: str
) -> None:
    test = suite_helpers.declare(**declaration)  # type: ignore[arg-type]
    decision = runner.decide(test, test.cases[0], options)
    assert decision.verdict is verdict
    assert reason_part in decision.reason


def test_run_test_runs_the_named_test_even_if_its_features_are_unsupported_or_it_is_provisional() -> None:
    test = suite_helpers.declare(feature_names=(features.KV_TRANSFER_TOPOLOGY_LATENCY,), provisional=True)
    options = runner.RunOptions(supported_features=frozenset(), run_tests=frozenset({"Example"}))
    assert runner.decide(test, test.cases[0], options).verdict is Verdict.RUN


def test_run_test_can_focus_one_case_of_a_test() -> None:
    test = suite_helpers.declare(cases=suite_helpers.two_cases())
    options = runner.RunOptions(supported_features=ALL, run_tests=frozenset({"Example[b]"}))
    verdicts = [runner.decide(test, case, options).verdict for case in test.cases]
    assert verdicts == [Verdict.SKIPPED, Verdict.RUN]


def test_a_case_of_a_test_that_runs_everywhere_can_run_in_one_environment_only() -> None:
    """ROUTER-TOPOLOGY's levels: every case in process, one level's on a cluster (Case.environments)."""
    cases = (Case("zone", environments=frozenset({"process"})), Case("rack"))
    test = suite_helpers.declare(cases=cases)
    on_cluster = runner.RunOptions(supported_features=ALL, env="cluster")
    zone = runner.decide(test, cases[0], on_cluster)
    assert zone.verdict is Verdict.WRONG_ENVIRONMENT and "this case runs only in: process; this run uses cluster" in zone.reason
    assert runner.decide(test, cases[1], on_cluster).verdict is Verdict.RUN
    in_process = runner.RunOptions(supported_features=ALL, env="process")
    assert [runner.decide(test, case, in_process).verdict for case in cases] == [Verdict.RUN, Verdict.RUN]


def test_a_skip_by_name_wins_over_an_unsupported_feature() -> None:
    test = suite_helpers.declare()
    options = runner.RunOptions(skip_tests=frozenset({"Example"}))
    assert runner.decide(test, Case("default"), options).verdict is Verdict.SKIPPED


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"A", "B"}),
        ({"exempt": ["B"]}, {"A"}),
        ({"manual": ["C"]}, {"C"}),
        ({"all_features": True, "exempt": ["A"]}, {"B", "C"}),
    ],
    ids=["declared", "declared-minus-exempt", "manual-replaces-declared", "all-minus-exempt"],
)
def test_the_supported_set_follows_gateway_apis_rule(kwargs: dict[str, object], expected: set[str]) -> None:
    assert runner.supported_features({"A", "B"}, known={"A", "B", "C"}, **kwargs) == expected  # type: ignore[arg-type]


def test_only_tests_whose_features_all_belong_to_a_requested_profile_are_selected() -> None:
    narrow = profiles.Profile(
        "NARROW", core=frozenset({features.DISAGGREGATED_SERVING}), extended=frozenset(), environments=frozenset({"process"})
    )
    inside = suite_helpers.declare("Inside")
    straddling = suite_helpers.declare("Straddling", feature_names=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER))
    assert runner.select([inside, straddling], [narrow]) == [inside]
    assert runner.select([inside, straddling], [narrow, profiles.ROUTER_TOPOLOGY]) == [inside, straddling]


def test_names_of_tests_and_cases_are_checked() -> None:
    test = suite_helpers.declare(cases=suite_helpers.two_cases())
    assert runner.unknown_names([test], {"Example", "Example[a]", "Example[c]", "Nope"}) == ["Example[c]", "Nope"]


def test_an_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(
        profiles.UnknownProfileError,
        match="known profiles: GANG-SCHEDULING, INFERENCESERVICE-API, OPERATOR-TOPOLOGY, PLANNER-SCALING, ROLLOUT-ISOLATION, "
        "ROUTER-TOPOLOGY",
    ):
        profiles.get("ROUTER-TOPOLGY")


def test_a_test_is_extended_when_any_of_its_features_is_extended() -> None:
    assert profiles.ROUTER_TOPOLOGY.is_extended((features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT))
    assert not profiles.ROUTER_TOPOLOGY.is_extended((features.DISAGGREGATED_SERVING,))
