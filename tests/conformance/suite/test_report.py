"""The report's rules on synthetic results: sections, counting a test once, success/partial/failure."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servecert.reports import conformance_report as cr
from servecert.reports import summary_page

CORE_A, CORE_B, EXT_A, EXT_B = "CoreA", "CoreB", "ExtA", "ExtB"
PROFILE = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A, CORE_B}), extended=frozenset({EXT_A, EXT_B}))
RUN = cr.RunInfo(
    date="2026-01-01T00:00:00+00:00",
    suite_version="0.1.0",
    mode="default",
    environment="process",
    implementation={"organization": "Acme", "project": "router", "url": "https://acme.invalid", "version": "v1", "contact": []},
    supported_features=frozenset({CORE_A, CORE_B, EXT_A}),
)


def case(test: str, status: str, *features: str, case_id: str = "default", provisional: bool = False) -> cr.CaseRecord:
    return cr.CaseRecord(
        test=test, case=case_id, status=status, features=features or (CORE_A,), provisional=provisional, message=f"{status}!"
    )


def profile_of(*records: cr.CaseRecord, supported: frozenset[str] = RUN.supported_features) -> dict[str, object]:
    return cr.profile_report(PROFILE, records, supported)


def test_a_report_has_the_versioned_header_and_implementation() -> None:
    report = cr.build(RUN, [PROFILE], [case("T", cr.PASSED)])
    assert (report["apiVersion"], report["kind"]) == ("servecert.dev/v1alpha1", "ConformanceReport")
    assert {k: report[k] for k in ("date", "suiteVersion", "mode", "environment")} == {
        "date": RUN.date,
        "suiteVersion": "0.1.0",
        "mode": "default",
        "environment": "process",
    }
    assert report["implementation"]["organization"] == "Acme"
    assert [p["name"] for p in report["profiles"]] == ["SAMPLE"]


def test_all_passing_is_success_in_both_sections() -> None:
    profile = profile_of(case("T1", cr.PASSED, CORE_A), case("T2", cr.PASSED, CORE_A, EXT_A))
    assert profile["core"] == {
        "result": "success",
        "statistics": {"passed": 1, "failed": 0, "skipped": 0},
        "failedTests": [],
        "skippedTests": [],
    }
    assert profile["extended"] == {
        "result": "success",
        "statistics": {"passed": 1, "failed": 0, "skipped": 0},
        "failedTests": [],
        "skippedTests": [],
        "supportedFeatures": [EXT_A],
        "unsupportedFeatures": [EXT_B],
    }
    assert profile["summary"] == "Core tests succeeded. Extended tests succeeded."


def test_a_test_counts_once_failed_if_any_case_failed() -> None:
    profile = profile_of(case("T", cr.PASSED, case_id="a"), case("T", cr.FAILED, case_id="b"), case("U", cr.PASSED))
    assert profile["core"]["result"] == "failure"
    assert profile["core"]["statistics"] == {"passed": 1, "failed": 1, "skipped": 0}
    assert profile["core"]["failedTests"] == ["T"]


def test_a_failed_case_is_listed_with_the_seed_sentence_and_what_the_suite_adds_to_it() -> None:
    seed = 'seed 003, VirtualConnector: "Timeout: ... the planner proceeds with new decisions anyway."'
    broken = cr.CaseRecord(
        test="T", case="never-ack", status=cr.FAILED, features=(CORE_A,), seed=seed, suite_note="the 3 load intervals are the suite's",
        message="1 decision in 131 s\nworkers over time: ...",
    )
    profile = profile_of(broken, case("T", cr.PASSED, case_id="late-ack"), case("U", cr.PASSED))
    assert profile["core"]["failures"] == [
        {"case": "T[never-ack]", "seed": seed, "suiteNote": "the 3 load intervals are the suite's", "message": "1 decision in 131 s"}
    ]
    assert "failures" not in profile["extended"]  # nothing failed there


def test_a_test_with_one_passed_case_and_the_others_skipped_counts_as_passed() -> None:
    profile = profile_of(case("T", cr.PASSED, case_id="a"), case("T", cr.SKIPPED, case_id="b"))
    assert profile["core"]["statistics"] == {"passed": 1, "failed": 0, "skipped": 0}


@pytest.mark.parametrize(
    "status",
    [cr.SKIPPED, cr.WRONG_ENVIRONMENT, cr.NOT_RUN, cr.NOT_SUPPORTED],
    ids=["skipped", "wrong-environment", "not-run", "not-supported"],
)
def test_a_skipped_core_test_makes_core_partial(status: str) -> None:
    profile = profile_of(case("T", cr.PASSED), case("S", status))
    assert profile["core"]["result"] == "partial"
    assert profile["core"]["skippedTests"] == ["S"]


def test_an_unsupported_core_feature_makes_core_partial_even_without_a_test_for_it() -> None:
    profile = profile_of(case("T", cr.PASSED), supported=frozenset({CORE_A}))
    assert profile["core"]["result"] == "partial"
    assert "Core features not supported: CoreB." in str(profile["summary"])


def test_a_core_section_where_no_test_ran_is_partial_not_success() -> None:
    profile = profile_of()
    assert profile["core"]["result"] == "partial"
    assert "No core test ran." in str(profile["summary"])


def test_an_unsupported_extended_feature_is_declared_not_counted_as_a_skip() -> None:
    profile = profile_of(case("T", cr.PASSED), case("E", cr.NOT_SUPPORTED, EXT_B))
    assert profile["extended"]["result"] == "success"
    assert profile["extended"]["statistics"] == {"passed": 0, "failed": 0, "skipped": 0}
    assert profile["extended"]["unsupportedFeatures"] == [EXT_B]


def test_an_explicitly_skipped_extended_test_makes_extended_partial_and_a_failure_makes_it_fail() -> None:
    assert profile_of(case("T", cr.PASSED), case("E", cr.SKIPPED, EXT_A))["extended"]["result"] == "partial"
    assert profile_of(case("T", cr.PASSED), case("E", cr.FAILED, EXT_A))["extended"]["result"] == "failure"


def test_provisional_tests_count_nowhere_when_skipped_and_are_listed_when_they_succeed() -> None:
    records = [case("T", cr.PASSED), case("P", cr.PROVISIONAL_SKIPPED, provisional=True), case("Q", cr.PASSED, EXT_A, provisional=True)]
    report = cr.build(RUN, [PROFILE], records)
    assert report["profiles"][0]["core"]["result"] == "success"
    assert report["succeededProvisionalTests"] == ["Q"]


def test_tests_outside_the_profile_are_left_out() -> None:
    profile = profile_of(case("T", cr.PASSED), case("Elsewhere", cr.FAILED, "OtherFeature"))
    assert profile["core"]["result"] == "success"


def test_the_yaml_round_trips_and_gives_one_line_per_section(tmp_path: Path) -> None:
    report = cr.build(RUN, [PROFILE], [case("T", cr.PASSED), case("E", cr.FAILED, EXT_A)])
    path = cr.write(tmp_path, report)
    assert cr.read(path) == yaml.safe_load(path.read_text()) == report
    assert cr.result_lines(report) == [
        "SAMPLE core: success (1 passed, 0 failed, 0 skipped)",
        "SAMPLE extended: failure (0 passed, 1 failed, 0 skipped)",
    ]


def test_the_summary_page_shows_every_case_with_its_verdict_and_message(tmp_path: Path) -> None:
    records = [case("T", cr.PASSED), case("E", cr.FAILED, EXT_A), case("Odd<&>", cr.SKIPPED)]
    path = summary_page.write(tmp_path, cr.build(RUN, [PROFILE], records), [PROFILE], records)
    page = path.read_text()
    assert path.name == "summary.html" and page.startswith("<!DOCTYPE html>")
    assert '<span class="failed">failed</span>' in page and "failed!" in page
    assert "Odd&lt;&amp;&gt;" in page and "Odd<&>" not in page
    assert "http://" not in page.replace("https://acme.invalid", "")  # no external assets


def test_a_feature_judged_in_another_environment_counts_nowhere_and_is_listed() -> None:
    """PLANNER-SCALING's connectors: the Virtual one in process, the Kubernetes one on a cluster. Counted as skips they would
    leave every run partial; left out, the report still says which tests another environment judges."""
    spec = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A, CORE_B}), extended=frozenset({EXT_A}), elsewhere=frozenset({CORE_B}))
    records = [
        cr.CaseRecord("TestA", "default", cr.PASSED, (CORE_A,)),
        cr.CaseRecord("TestB", "default", cr.SKIPPED, (CORE_B,)),
    ]
    report = cr.profile_report(spec, records, supported=frozenset({CORE_A}))
    assert report["core"]["result"] == cr.SUCCESS, report
    assert report["core"]["statistics"] == {"passed": 1, "failed": 0, "skipped": 0}
    assert report["core"]["judgedElsewhere"] == ["TestB"]
    assert "not supported" not in report["summary"], "a core feature judged elsewhere is not missing here"


def test_a_skip_of_a_feature_this_environment_judges_still_makes_it_partial() -> None:
    spec = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A, CORE_B}), extended=frozenset({EXT_A}), elsewhere=frozenset({CORE_B}))
    records = [cr.CaseRecord("TestA", "default", cr.SKIPPED, (CORE_A,)), cr.CaseRecord("TestB", "default", cr.PASSED, (CORE_B,))]
    assert cr.profile_report(spec, records, supported=frozenset({CORE_A, CORE_B}))["core"]["result"] == cr.PARTIAL


def test_a_test_another_environment_of_the_profile_judges_counts_nowhere_and_is_listed() -> None:
    """PLANNER-SCALING's rules the process environment judges in full: on a cluster they are not skips (which would leave
    the cluster's run partial) but listed as judged elsewhere; a wrong-environment test not listed so still is a skip."""
    spec = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A}), extended=frozenset(), elsewhere_tests=frozenset({"TestB"}))
    records = [case("TestA", cr.PASSED), case("TestB", cr.WRONG_ENVIRONMENT)]
    report = cr.profile_report(spec, records, supported=frozenset({CORE_A}))
    assert report["core"]["result"] == cr.SUCCESS, report
    assert report["core"]["statistics"] == {"passed": 1, "failed": 0, "skipped": 0}
    assert report["core"]["judgedElsewhere"] == ["TestB"]
    unlisted = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A}), extended=frozenset())
    assert cr.profile_report(unlisted, records, supported=frozenset({CORE_A}))["core"]["result"] == cr.PARTIAL


def test_the_profile_lists_the_tests_only_its_other_environments_run() -> None:
    from servecert.conformance.suite import collect, profiles

    tests = collect.collect()
    on_cluster = profiles.PLANNER_SCALING.tests_judged_elsewhere(tests, "cluster")
    in_process = profiles.PLANNER_SCALING.tests_judged_elsewhere(tests, "process")
    assert "PlannerScalingAcknowledgementGuard" in on_cluster and "PlannerScalesItsOwnDgdByType" in in_process
    assert not on_cluster & in_process
    assert not profiles.ROLLOUT_ISOLATION.tests_judged_elsewhere(tests, "process"), "a cluster-only profile has no elsewhere"


def test_a_case_another_environment_judges_counts_nowhere_and_its_test_counts_by_the_others() -> None:
    """ROUTER-TOPOLOGY on a cluster: each test's rack cases run, its zone and host cases are judged in process."""
    spec = cr.ProfileSpec("SAMPLE", core=frozenset({CORE_A}), extended=frozenset(), elsewhere_tests=frozenset({"TestA[zone]"}))
    zone = case("TestA", cr.WRONG_ENVIRONMENT, case_id="zone")
    report = cr.profile_report(spec, [zone, case("TestA", cr.PASSED, case_id="rack")], supported=frozenset({CORE_A}))
    assert report["core"]["result"] == cr.SUCCESS, report
    assert report["core"]["judgedElsewhere"] == ["TestA[zone]"]
    failed = cr.profile_report(spec, [zone, case("TestA", cr.FAILED, case_id="rack")], supported=frozenset({CORE_A}))
    assert failed["core"]["failedTests"] == ["TestA"]
    alone = cr.profile_report(spec, [zone], supported=frozenset({CORE_A}))
    assert alone["core"]["statistics"] == {"passed": 0, "failed": 0, "skipped": 0}, "a test whose every case is elsewhere counts nowhere"


def test_router_topology_on_a_cluster_runs_each_test_at_one_level_and_the_process_at_every_level() -> None:
    from servecert.conformance.suite import collect, profiles
    from servecert.conformance.tests.router_topology import _placements

    tests = collect.collect()
    on_cluster = profiles.ROUTER_TOPOLOGY.tests_judged_elsewhere(tests, "cluster")
    assert "RouterTopologyTransfersStayInDomain[zone]" in on_cluster and "RouterTopologyTransfersStayInDomain[host]" in on_cluster
    assert f"RouterTopologyTransfersStayInDomain[{_placements.CLUSTER_LEVEL}]" not in on_cluster
    assert not {n for n in profiles.ROUTER_TOPOLOGY.tests_judged_elsewhere(tests, "process") if "[" in n}, "process runs every level"
    router = [t for t in tests if t.short_name.startswith("RouterTopology") and "cluster" in t.environments]
    for test in router:
        levels = {case.params["level"] for case in test.cases if "cluster" in case.environments}
        assert levels == {_placements.CLUSTER_LEVEL}, f"{test.short_name} runs levels {levels} on a cluster"
