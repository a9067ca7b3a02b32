"""A cluster that cannot come up fails its cases *in setup*: the report names the step, the log and the time.

The cache given to ``servecert certify`` holds binaries that are recorded as built but exit at
once (a broken binary path, as a bad build or a wrong cache would leave), so the embedded
cluster's bring-up fails within seconds, with no Go toolchain involved. Before, such a case was
reported as ``call failed`` in 0.00 s, with nothing saying the cluster never came up or why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

from servecert.harness.cluster import binaries
from tests.certify.run import REPO

BROKEN = "#!/bin/sh\necho 'broken on purpose by a self-test' >&2\nexit 3\n"
PROFILE = "OPERATOR-TOPOLOGY"


def broken_cache(root: Path) -> Path:
    """A cache whose every binary is recorded as valid in the manifest but exits 3."""
    key = binaries.versions_key()
    directory = root / "bin" / key
    directory.mkdir(parents=True)
    entries = {}
    for component in binaries.COMPONENTS:
        path = directory / component.name
        path.write_text(BROKEN)
        path.chmod(0o755)
        entries[component.name] = {**binaries._file_stamp(path), "version": component.expect, "build_seconds": 0.0}
    crds = directory / "volcano-crds"
    crds.mkdir()
    (crds / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    entries["volcano-crds"] = {"files": 1}
    binaries._write_manifest(directory, key, entries)
    return root


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    root = tmp_path_factory.mktemp("setup-failure")
    cache, report_dir = broken_cache(root / "cache"), root / "report"
    env = {k: v for k, v in os.environ.items() if k not in ("SERVECERT_CLUSTER_NAME", "SERVECERT_CLUSTER_BACKEND", "PYTEST_XDIST_WORKER")}
    env.update({"SERVECERT_CACHE": str(cache), "PYTHONPATH": str(REPO)})
    cmd = [sys.executable, "-m", "servecert", "certify", "--implementation", "reference", "--env", "cluster"]
    cmd += ["--profile", PROFILE, "--report-dir", str(report_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=REPO, check=False)
    return done.returncode, done.stdout + done.stderr, report_dir


def test_the_run_is_not_certified_and_the_console_names_the_setup_step_and_log(failed_run: tuple[int, str, Path]) -> None:
    code, output, _report_dir = failed_run
    assert code == 1, output[-3000:]
    assert "setup failed at cluster bring-up after" in output, output[-3000:]
    assert "/logs" in output and "log: " in output
    assert "call failed" not in output


def test_the_summary_page_shows_the_phase_the_cause_the_log_and_the_time(failed_run: tuple[int, str, Path]) -> None:
    _code, output, report_dir = failed_run
    page = (report_dir / "summary.html").read_text()
    assert "in setup: cluster bring-up" in page, output[-3000:]
    assert "did not come up" in page and "log: " in page
    assert "call failed" not in page
    report = yaml.safe_load((report_dir / "conformance-report.yaml").read_text())
    [profile] = report["profiles"]
    assert profile["core"]["result"] == "failure"


def test_junit_names_the_setup_step_for_every_case_and_times_the_first(failed_run: tuple[int, str, Path]) -> None:
    _code, output, report_dir = failed_run
    cases = ElementTree.parse(report_dir / "junit.xml").getroot().iter("testcase")
    failures = [(float(case.get("time", "0")), case.find("failure")) for case in cases]
    failed = [(t, f.get("message", "")) for t, f in failures if f is not None]
    assert failed, output[-3000:]
    assert all("setup failed at cluster bring-up" in message for _t, message in failed), failed[0]
    assert "it failed earlier in this run" in failed[-1][1], "later cases must not try the bring-up again"
    assert failed[0][0] > 0.0, "the first case's time is the bring-up it tried"
