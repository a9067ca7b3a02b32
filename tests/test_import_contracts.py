"""Each import-linter contract in pyproject.toml fails on a deliberate violation of it.

A contract that nothing can break is a check that cannot fail: here the project's packages are
copied to a temporary folder, one import that breaks exactly one rule is added to one module,
and ``lint-imports --contract <id>`` must exit 1 naming that contract as broken. The copy
without a violation must keep every contract.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("protocol", "fakes", "reference_impl", "fixtures", "conformance", "reports", "load", "benchmarks", "servecert")
LINT_BOUND_S = 120

# (contract id, module that gets the import, the import that breaks that contract alone)
VIOLATIONS = [
    ("layers", "fixtures/traffic.py", "import benchmarks.figures"),
    ("suite-agnostic", "conformance/utils/kube.py", "import reference_impl.frontend"),
    ("suite-agnostic", "conformance/utils/kube.py", "import fixtures.reference.adapter"),  # indirect: the adapter imports reference_impl
    ("reference-through-adapter", "fixtures/traffic.py", "import reference_impl.frontend.discovery"),
    ("suite-layers", "conformance/suite/features.py", "import conformance.utils.kube"),
    ("suite-layers", "conformance/utils/manifests.py", "import conformance.tests.router_topology._checks"),
    ("profiles-independent", "conformance/tests/router_topology/_checks.py", "import conformance.tests.planner_scaling._checks"),
    ("reference-parts-independent", "reference_impl/planner/__init__.py", "import reference_impl.frontend"),
    ("reference-fakes-independent", "fakes/__init__.py", "import reference_impl.traffic_split"),
    ("leaves", "reports/__init__.py", "import protocol"),
    ("leaves", "load/__init__.py", "import fixtures"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.fixture
def violation(tree: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    module, line = request.param
    path = tree / module
    original = path.read_text()
    path.write_text(f"{original}\n{line}  # noqa: deliberate violation\n")
    try:
        yield tree
    finally:
        path.write_text(original)


def lint_imports(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on ``tree`` (its packages first on sys.path, not the installed ones)."""
    script = "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    argv = [sys.executable, "-c", script, "--no-cache", "--no-logo", *(f"--contract={c}" for c in contracts)]
    return subprocess.run(argv, cwd=tree, capture_output=True, text=True, timeout=LINT_BOUND_S, check=False)


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    done = lint_imports(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("contract", "violation"),
    [(c, (m, line)) for c, m, line in VIOLATIONS],
    ids=[f"{c}:{m}:{line.split()[-1]}" for c, m, line in VIOLATIONS],
    indirect=["violation"],
)
def test_a_violation_breaks_its_contract(contract: str, violation: Path) -> None:
    done = lint_imports(violation, contract)
    assert done.returncode == 1, f"lint-imports kept {contract} despite the violation:\n{done.stdout}{done.stderr}"
    assert "1 broken" in done.stdout, done.stdout
