"""Run ``servecert certify`` in a subprocess, exactly as a vendor would, and read the report it writes.

The suite's self-tests that certify the reference or a broken implementation share this: the
command line, the repository on PYTHONPATH, an embedded cluster joined by name when given, and a
clear failure when no report was written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def certify(
    implementation: str,
    report_dir: Path,
    *args: str,
    cluster_name: str | None = None,
    timeout_s: float = 600.0,
) -> tuple[int, dict[str, Any], str]:
    """Exit code, parsed conformance-report.yaml, and stdout + stderr."""
    cmd = [sys.executable, "-m", "servecert", "certify", "--implementation", implementation, "--report-dir", str(report_dir), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if cluster_name is not None:
        env["SERVECERT_CLUSTER_NAME"] = cluster_name
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=REPO, check=False)
    output = done.stdout + done.stderr
    report_path = report_dir / "conformance-report.yaml"
    assert report_path.is_file(), f"no report written; output: {output[-3000:]}"
    return done.returncode, yaml.safe_load(report_path.read_text()), output


def profile_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    [profile] = [p for p in report["profiles"] if p["name"] == name]
    return profile
