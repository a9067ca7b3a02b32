"""The pods' programs get the parser of their own commands alone, with the same options as the whole command's."""

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
