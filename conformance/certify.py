"""``servecert certify``: run the requested conformance profiles and write the report.

No profile is implemented yet: the suite framework and the first profile (ROUTER-TOPOLOGY) come
next. Until then the command says so plainly instead of pretending to certify anything: a bare
run exits 0 after saying so, and naming a profile exits 2 because it cannot be certified.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--implementation", default="reference", help="adapter name or module:attribute")
    p.add_argument("--profile", action="append", default=[], help="profile to run (repeatable)")
    p.add_argument("--env", default="process", choices=["process", "cluster"])
    p.add_argument("--report-dir", default="reports/latest")


def run(args: argparse.Namespace) -> int:
    message = (
        "no conformance profile is implemented yet, so nothing was certified and no report was written; "
        "the fake GPU engine is ready (servecert engine serve), the suite framework and ROUTER-TOPOLOGY come next"
    )
    if args.profile:
        print(f"servecert certify: error: cannot certify {', '.join(args.profile)}: {message}", file=sys.stderr)
        return 2
    print(f"servecert certify: {message}")
    return 0
