"""Each import-linter contract in pyproject.toml fails on a deliberate violation of it.

A contract that nothing can break is a check that cannot fail: here the project's packages are
copied to a temporary folder, one import that breaks exactly one rule is added to one module,
and ``lint-imports --contract <id>`` must exit 1 naming that contract as broken. The copy
without a violation must keep every contract.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("servecert",)
LINT_BOUND_S = 120

# (contract id, module that gets the import, the import that breaks that contract alone)
VIOLATIONS = [
    ("layers", "servecert/harness/traffic.py", "import servecert.benchmarks.figures"),
    ("layers", "servecert/adapters/contract/__init__.py", "import servecert.harness.traffic"),  # the vendor contract sits below the harness
    ("suite-agnostic", "servecert/conformance/utils/kube.py", "import servecert.reference_impl.frontend"),
    ("suite-agnostic", "servecert/conformance/utils/kube.py", "import servecert.adapters.dynamo.adapter"),
    ("reference-through-adapter", "servecert/harness/traffic.py", "import servecert.reference_impl.frontend.discovery"),
    ("reference-through-adapter", "servecert/adapters/dynamo/adapter.py", "import servecert.reference_impl.frontend.discovery"),
    ("adapters-independent", "servecert/adapters/dynamo/adapter.py", "import servecert.adapters.pd_routers.deployment"),
    ("vendor-adapters-on-contract", "servecert/adapters/dynamo/adapter.py", "import servecert.protocol.waiting"),
    ("vendor-adapters-on-contract", "servecert/adapters/pd_routers/discovery.py", "import servecert.harness.cluster.kube"),
    ("benchmarks-public-seam", "servecert/benchmarks/figures.py", "import servecert.conformance.tests.planner_scaling._checks"),
    ("suite-layers", "servecert/conformance/suite/profiles.py", "import servecert.conformance.utils.kube"),
    ("suite-layers", "servecert/conformance/utils/manifests.py", "import servecert.conformance.tests.router_topology._checks"),
    ("suite-layers", "servecert/conformance/tests/router_topology/_checks.py", "import servecert.conformance.scenarios"),
    (
        "profiles-independent",
        "servecert/conformance/tests/router_topology/_checks.py",
        "import servecert.conformance.tests.planner_scaling._checks",
    ),
    ("reference-parts-independent", "servecert/reference_impl/planner/__init__.py", "import servecert.reference_impl.frontend"),
    ("reference-fakes-independent", "servecert/fakes/__init__.py", "import servecert.reference_impl.traffic_split"),
    ("leaves", "servecert/reports/__init__.py", "import servecert.protocol"),
    ("leaves", "servecert/load/__init__.py", "import servecert.harness"),
    ("leaves", "servecert/features.py", "import servecert.protocol.waiting"),
    ("pd-routers-acyclic", "servecert/adapters/pd_routers/deployment.py", "import servecert.adapters.pd_routers.discovery"),
    ("harness-acyclic", "servecert/harness/cluster/state.py", "import servecert.harness.cluster.backends"),
    ("harness-acyclic", "servecert/adapters/dynamo/model_folder.py", "import servecert.adapters.dynamo.adapter"),
]


def test_every_contract_has_a_violation() -> None:
    """Each contract in pyproject.toml is shown to break here (a new contract without a violation fails)."""
    ids = set(re.findall(r'^id = "([\w-]+)"', (ROOT / "pyproject.toml").read_text(), re.M))
    assert len(ids) >= 10
    assert ids == {contract for contract, _, _ in VIOLATIONS}


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
