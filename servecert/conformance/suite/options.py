"""The suite's options, declared once for pytest and for ``servecert certify``, and resolved.

Both faces take the same options: the pytest plugin adds ``OPTIONS`` to its
``parser.getgroup("servecert")``; ``certify`` adds them to its argparse subcommand and hands
them back to pytest through ``to_pytest_args``. Two names differ because pytest or one of its
plugins already owns them: pytest-timeout's ``--timeout`` is ``--timeout-override`` under
pytest, and pytest's ``--version`` is ``--implementation-version``; certify keeps the short ones.

``resolve`` turns raw values into ``Settings``: it loads the adapter, looks up the profiles,
checks the environment, works out the supported feature set and the timeouts, and raises
``OptionError`` with a one-line message for anything wrong, so both faces can show it plainly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servecert.adapters.contract import Implementation, ImplementationMetadata
    from servecert.conformance.suite.profiles import Profile
    from servecert.conformance.suite.runner import RunOptions

STORE = "store"
APPEND = "append"
FLAG = "store_true"


@dataclass(frozen=True)
class Option:
    dest: str
    flag: str  # the pytest flag
    help: str
    action: str = STORE
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    cli_flag: str | None = None  # certify's flag, where pytest already owns ``flag``'s name

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dest": self.dest, "action": self.action, "help": self.help}
        if self.action != FLAG:
            out["default"] = self.default
            out["metavar"] = self.metavar
        if self.choices:
            out["choices"] = list(self.choices)
        return out


OPTIONS: tuple[Option, ...] = (
    Option(
        "servecert_implementation",
        "--implementation",
        "implementation under test: an adapter's entry-point name (group servecert.implementations) or module:attribute; "
        "without it no conformance test is collected",
        metavar="NAME",
    ),
    Option(
        "servecert_profiles",
        "--profile",
        "profile to run (repeatable); default: every profile the environment supports",
        action=APPEND,
        metavar="PROFILE",
    ),
    Option("servecert_env", "--env", "environment the tests run in (default: process)", default="process", choices=("process", "cluster")),
    Option(
        "servecert_supported_features",
        "--supported-features",
        "features the implementation supports (comma-separated, repeatable), instead of what its adapter declares",
        action=APPEND,
        metavar="F1,F2",
    ),
    Option(
        "servecert_exempt_features",
        "--exempt-features",
        "features to treat as unsupported (comma-separated, repeatable)",
        action=APPEND,
        metavar="F1,F2",
    ),
    Option("servecert_all_features", "--all-features", "treat every known feature (minus --exempt-features) as supported", action=FLAG),
    Option(
        "servecert_skip_tests",
        "--skip-tests",
        "tests (ShortName) or cases (ShortName[case]) to skip (comma-separated, repeatable); skipping makes the result partial",
        action=APPEND,
        metavar="NAMES",
    ),
    Option(
        "servecert_run_tests",
        "--run-test",
        "run only these tests or cases (comma-separated, repeatable), even if their features are unsupported or they are provisional",
        action=APPEND,
        metavar="NAMES",
    ),
    Option("servecert_include_provisional", "--include-provisional", "also run provisional tests", action=FLAG),
    Option(
        "servecert_timeouts",
        "--timeout-override",
        "override one timeout, e.g. eventual_consistency_s=20 (repeatable; see docs/suite.md for the keys)",
        action=APPEND,
        metavar="KEY=VALUE",
        cli_flag="--timeout",
    ),
    Option(
        "servecert_timeouts_file", "--timeouts-file", "YAML mapping of timeout key to value, applied before the overrides", metavar="PATH"
    ),
    Option(
        "servecert_report_dir",
        "--report-dir",
        "write conformance-report.yaml and summary.html here (and junit.xml / allure-results unless given)",
        metavar="DIR",
    ),
    Option("servecert_report_mode", "--report-mode", "mode recorded in the report (default: default)", default="default", metavar="MODE"),
    Option("servecert_organization", "--organization", "implementation metadata for the report: organization", metavar="TEXT"),
    Option("servecert_project", "--project", "implementation metadata for the report: project", metavar="TEXT"),
    Option("servecert_url", "--url", "implementation metadata for the report: URL", metavar="URL"),
    Option(
        "servecert_version",
        "--implementation-version",
        "implementation metadata for the report: version (a tag or commit)",
        metavar="VERSION",
        cli_flag="--version",
    ),
    Option("servecert_contact", "--contact", "implementation metadata for the report: contact (repeatable)", action=APPEND, metavar="TEXT"),
    Option(
        "servecert_tests_package",
        "--tests-package",
        "for suite developers: the package whose modules hold the conformance tests (default: servecert.conformance.tests)",
        default="servecert.conformance.tests",
        metavar="PACKAGE",
    ),
)


class OptionError(Exception):
    """An option value the suite cannot use; the message is one line saying what exists."""


@dataclass(frozen=True)
class Settings:
    implementation_name: str
    implementation: Implementation
    metadata: ImplementationMetadata
    profiles: tuple[Profile, ...]
    run: RunOptions
    supported_features_source: str  # declared | manual | all
    ignored_features: tuple[str, ...]  # declared by the adapter, unknown to this suite version
    report_dir: Path | None
    report_mode: str
    tests_package: str


def split(values: Iterable[str] | None) -> list[str]:
    """Repeatable, comma-separated values as one flat list."""
    return [item.strip() for value in values or () for item in value.split(",") if item.strip()]


def to_pytest_args(values: Mapping[str, Any]) -> list[str]:
    """The pytest flags that reproduce ``values`` (a certify namespace as a mapping)."""
    args: list[str] = []
    for option in OPTIONS:
        value = values.get(option.dest)
        if option.action == FLAG:
            args += [option.flag] if value else []
        elif option.action == APPEND:
            args += [f"{option.flag}={item}" for item in value or ()]
        elif value is not None and value != option.default:
            args.append(f"{option.flag}={value}")
    return args


def _profiles(names: list[str], env: str) -> tuple[Profile, ...]:
    from servecert.conformance.suite import profiles

    if not names:
        found = profiles.for_environment(env)
        if not found:
            raise OptionError(f"no profile runs in the {env} environment; known profiles: {', '.join(sorted(profiles.PROFILES))}")
        return found
    try:
        chosen = tuple(profiles.get(name) for name in dict.fromkeys(names))
    except profiles.UnknownProfileError as exc:
        raise OptionError(str(exc)) from None
    for profile in chosen:
        if env not in profile.environments:
            raise OptionError(
                f"profile {profile.name} does not run in the {env} environment (it runs in: {', '.join(sorted(profile.environments))})"
            )
    return chosen


def _metadata(base: ImplementationMetadata, values: Mapping[str, Any]) -> ImplementationMetadata:
    changes: dict[str, Any] = {
        key: values[f"servecert_{key}"]
        for key in ("organization", "project", "url", "version")
        if values.get(f"servecert_{key}") is not None
    }
    if values.get("servecert_contact"):
        changes["contact"] = tuple(split(values["servecert_contact"]))
    return dataclasses.replace(base, **changes)


def resolve(values: Mapping[str, Any], *, timeout_flag: str = "--timeout-override") -> Settings | None:
    """Settings from raw option values (keyed by ``Option.dest``); None when no implementation is named."""
    name = values.get("servecert_implementation")
    if not name:
        return None
    from servecert import features
    from servecert.adapters import contract as adapter
    from servecert.conformance.suite import environments, runner, timeouts

    env = values.get("servecert_env") or "process"
    try:
        environments.check_available(env)
        chosen = _profiles(split(values.get("servecert_profiles")), env)
        implementation = adapter.load(name)
        manual = split(values.get("servecert_supported_features")) or None
        exempt = features.check_known(split(values.get("servecert_exempt_features")), what="--exempt-features")
        if manual is not None:
            features.check_known(manual, what="--supported-features")
        supported = runner.supported_features(
            implementation.supported_features & features.names(),
            manual=manual,
            exempt=exempt,
            all_features=bool(values.get("servecert_all_features")),
            known=features.names(),
        )
        timeouts_file = values.get("servecert_timeouts_file")
        run = runner.RunOptions(
            env=env,
            supported_features=supported,
            skip_tests=frozenset(split(values.get("servecert_skip_tests"))),
            run_tests=frozenset(split(values.get("servecert_run_tests"))),
            include_provisional=bool(values.get("servecert_include_provisional")),
            timeouts=timeouts.resolve(
                Path(timeouts_file) if timeouts_file else None, values.get("servecert_timeouts") or (), flag=timeout_flag
            ),
        )
    except (environments.EnvironmentUnavailable, adapter.AdapterError, features.UnknownFeatureError, timeouts.TimeoutsError) as exc:
        raise OptionError(str(exc)) from None
    report_dir = values.get("servecert_report_dir")
    return Settings(
        implementation_name=name,
        implementation=implementation,
        metadata=_metadata(implementation.metadata, values),
        profiles=chosen,
        run=run,
        ignored_features=tuple(sorted(implementation.supported_features - features.names())),
        supported_features_source="all" if values.get("servecert_all_features") else ("manual" if manual is not None else "declared"),
        report_dir=Path(report_dir) if report_dir else None,
        report_mode=values.get("servecert_report_mode") or "default",
        tests_package=values.get("servecert_tests_package") or "servecert.conformance.tests",
    )
