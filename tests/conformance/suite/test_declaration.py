"""Declaring tests and finding them: validation, one test per module, and the timeouts settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecert import features
from servecert.conformance.suite import collect, timeouts
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef
from tests.conformance.suite import suite_helpers

HEADER = (
    "from servecert.conformance.suite.test_case import ConformanceTest\n"
    "from tests.conformance.suite.suite_helpers import SAMPLE_SEED, passing_check\n"
)


def module(short_name: str, feature: str = "DisaggregatedServing") -> str:
    declaration = f"short_name={short_name!r}, description='d', features=({feature!r},), check=passing_check, seed=SAMPLE_SEED"
    return HEADER + f"TEST = ConformanceTest({declaration})\n"


def make_package(pytester: pytest.Pytester, name: str, files: dict[str, str]) -> str:
    pytester.syspathinsert()
    pytester.mkpydir(name)
    for filename, source in files.items():
        path = pytester.path / name / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(source)
    return name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"short_name": "lower_case"}, "CamelCase"),
        ({"features": ()}, "non-empty tuple"),
        ({"features": "DisaggregatedServing"}, "non-empty tuple"),
        ({"environments": frozenset({"laptop"})}, "environments"),
        ({"cases": (Case("x"), Case("x"))}, "duplicate case ids"),
        ({"environments": frozenset({"cluster"}), "cases": (Case("x", environments=frozenset({"process"})),)}, "run in none"),
        ({"description": " "}, "description is empty"),
        ({"seed": "000 3. KV Router Filtering"}, "seed must be a SeedRef"),
    ],
    ids=[
        "short-name", "no-features", "features-as-a-string", "unknown-environment", "duplicate-cases", "case-nowhere",
        "empty-description",
        "seed-as-a-string",
    ],
)
def test_a_malformed_declaration_is_refused_with_a_reason(kwargs: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"short_name": "Fine", "description": "d", "features": ("DisaggregatedServing",)}
    values["seed"] = suite_helpers.SAMPLE_SEED
    values.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ConformanceTest(check=suite_helpers.passing_check, **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (("005", "1. Anything", "a line"), "not one of 000, 001, 002, 003, 004"),
        (("000", " ", "a line"), "section is empty"),
        (("000", "3. KV Router Filtering", ""), "one non-empty line"),
        (("000", "3. KV Router Filtering", "two\nlines"), "one non-empty line"),
        (("000", "3. KV Router Filtering", "x" * 241), "at most 240"),
    ],
    ids=["unknown-seed", "no-section", "no-quote", "two-lines", "too-long"],
)
def test_a_malformed_seed_citation_is_refused(fields: tuple[str, str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SeedRef(*fields)


def test_a_synchronous_check_is_refused() -> None:
    def check(ctx: object) -> None:
        return None

    with pytest.raises(ValueError, match="async function"):
        suite_helpers.declare(check=check)  # type: ignore[arg-type]


def test_a_case_in_an_unknown_environment_is_refused() -> None:
    with pytest.raises(ValueError, match="environments must be a non-empty subset"):
        Case("x", environments=frozenset({"laptop"}))


def test_case_parameters_are_read_only() -> None:
    case = Case("a", {"n": 1})
    with pytest.raises(TypeError):
        case.params["n"] = 2  # type: ignore[index]


def test_the_sample_package_yields_one_test_per_module_sorted_by_module() -> None:
    tests = collect.collect(suite_helpers.SAMPLE_TESTS)
    assert [t.source.rsplit(".", 1)[-1] for t in tests] == [
        "deploys",
        "error_503",
        "latency",
        "preferred_weight",
        "topology_filter",
        "topology_unset",
    ]
    assert tests[0].short_name == "SampleDeploys" and [c.id for c in tests[0].cases] == ["one-worker", "two-workers"]


def test_the_real_tests_package_collects() -> None:
    for test in collect.collect():
        assert test.source.startswith("servecert.conformance.tests.")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.py": module("Same"), "b.py": module("Same")}, r"short name Same is declared twice: in dup\d.a and in dup\d.b"),
        ({"a.py": "X = 1\n"}, r"dup\d.a defines no TEST"),
        ({"a.py": "TEST = 1\n"}, r"dup\d.a.TEST is a int, not a ConformanceTest"),
        ({"a.py": module("Typo", "KVTransferTopologyFiltre")}, "unknown feature.*KVTransferTopologyFiltre; known features:"),
        ({"a.py": "import nowhere_to_be_found\n"}, r"cannot import conformance test module dup\d.a: ModuleNotFoundError"),
        ({"sub/a.py": module("Deep"), "sub/b.py": module("Deep")}, "declared twice"),
    ],
    ids=["duplicate-short-name", "missing-TEST", "TEST-of-another-type", "unknown-feature", "import-error", "nested-packages"],
)
def test_a_broken_tests_package_is_a_collection_error_naming_the_module(
    pytester: pytest.Pytester, files: dict[str, str], message: str, request: pytest.FixtureRequest
) -> None:
    name = f"dup{request.node.callspec.indices['files']}"
    package = make_package(pytester, name, files)
    with pytest.raises(collect.CollectionError, match=message):
        collect.collect(package)


def test_helper_modules_start_with_an_underscore(pytester: pytest.Pytester) -> None:
    package = make_package(pytester, "helpers_ok", {"_shared.py": "VALUE = 1\n", "a.py": module("Alone")})
    assert [t.short_name for t in collect.collect(package)] == ["Alone"]


def test_feature_names_are_checked_against_the_registry() -> None:
    assert features.check_known(["DisaggregatedServing"], what="x") == {"DisaggregatedServing"}
    with pytest.raises(features.UnknownFeatureError, match="--exempt-features: unknown feature"):
        features.check_known(["Nope"], what="--exempt-features")


def test_timeouts_come_from_defaults_then_the_file_then_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "timeouts.yaml"
    path.write_text("request_s: 5\neventual_consistency_s: 20\n")
    resolved = timeouts.resolve(path, ["request_s=7", "required_consecutive_successes=2;test_s=60"])
    assert (resolved.request_s, resolved.eventual_consistency_s, resolved.test_s) == (7.0, 20.0, 60.0)
    assert resolved.required_consecutive_successes == 2 and isinstance(resolved.required_consecutive_successes, int)
    assert resolved.deploy_ready_s == 30.0
    assert resolved.overrides() == {"request_s": 7.0, "eventual_consistency_s": 20.0, "test_s": 60.0, "required_consecutive_successes": 2}
    assert resolved.beyond_bounds() == {"eventual_consistency_s": 20.0, "required_consecutive_successes": 2}


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["request=5"], "unknown timeout key.*request; known keys: deploy_ready_s"),
        (["request_s"], "is not KEY=VALUE"),
        (["request_s=soon"], "must be a number"),
        (["request_s=0"], "must be > 0"),
        (["required_consecutive_successes=2.5"], "must be an integer"),
    ],
    ids=["unknown-key", "no-value", "not-a-number", "zero", "fractional-count"],
)
def test_a_bad_timeout_override_is_refused_with_the_known_keys(pairs: list[str], message: str) -> None:
    with pytest.raises(timeouts.TimeoutsError, match=message):
        timeouts.resolve(None, pairs)


def test_every_timeout_is_documented_with_its_unit() -> None:
    lines = timeouts.describe()
    assert len(lines) == len(timeouts.keys())
    assert all(" s)" in line or " count)" in line or " ratio)" in line or " fraction)" in line for line in lines)
