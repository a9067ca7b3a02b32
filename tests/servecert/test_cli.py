"""The pods' programs, and each other command, get the parser of their own command alone, with the same options as the whole command's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from servecert import cli

ARGV = {
    ("engine", "serve"): ["--model", "m", "--role", "decode", "--block-size", "32"],
    ("frontend", "serve"): ["--port", "0"],
    ("proxy", "serve"): [],
    ("planner", "serve"): ["--ttft-ms", "700", "--mode", "agg"],
}


@pytest.mark.parametrize("command", sorted(cli.POD_PROGRAMS))
def test_a_pod_program_parses_as_the_whole_command_does(command: tuple[str, str]) -> None:
    argv = [*command, *ARGV[command]]
    alone, whole = vars(cli.pod_program_parser().parse_args(argv)), vars(cli.build_parser().parse_args(argv))
    assert alone == whole


def test_the_pod_programs_parser_imports_neither_kopf_nor_the_suite() -> None:
    """Each pod paid 0.24 s of CPU for the whole parser's imports; make test starts hundreds of pods."""
    probe = "\n".join(
        [
            "import sys",
            "from servecert import cli",
            "cli.pod_program_parser()",
            "print(sorted({'kopf', 'servecert.conformance', 'servecert.benchmarks'} & set(sys.modules)))",
        ]
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


COMMAND_ARGV = {
    "certify": ["certify", "--implementation", "reference", "--env", "cluster", "--run-test", "RolloutSteps", "--", "-x"],
    "operator": ["operator", "run", "--kubeconfig", "k", "--namespaces", "a,b", "--webhook-port", "9443", "--cert", "c", "--key", "k"],
    "planner": ["planner", "demo", "--time-scale", "2"],
    "bench": ["bench", "planner-calibrate", "--rps", "3"],
    "cluster": ["cluster", "up", "--name", "c", "--nodes", "3"],
    "setup": ["setup", "--env", "cluster"],
}


@pytest.mark.parametrize("command", sorted(COMMAND_ARGV))
def test_a_command_parses_alone_as_the_whole_command_does(command: str) -> None:
    argv = COMMAND_ARGV[command]
    alone, whole = vars(cli.build_parser(only=command).parse_args(argv)), vars(cli.build_parser().parse_args(argv))
    assert alone == whole


def test_every_command_has_its_own_parser() -> None:
    assert set(cli.COMMANDS) == {name for name, _ in cli.POD_PROGRAMS} | set(COMMAND_ARGV) | {"load"}


def test_certify_and_the_operator_start_without_the_benchmarks() -> None:
    """make test starts a few hundred certify runs and operators: the whole parser cost each 2.6 s of CPU."""
    probe = "\n".join(
        [
            "import sys",
            "from servecert import cli",
            "cli.build_parser(only='certify')",
            "cli.build_parser(only='operator')",
            "print(sorted(m for m in sys.modules if m.startswith('servecert.benchmarks')))",
        ]
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
