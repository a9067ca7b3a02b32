"""The load script behind the side-by-side router figures lives in the repository, byte for byte as given.

``servecert bench router`` and ``bench pd-routers`` run ``servecert/benchmarks/scripts/openai_load.py``: a
fresh clone needs nothing beside it. The copy must stay the script the Dynamo 1.6.1 anchor figures
were measured with ("use it unchanged"), so its digest is pinned; where the project's ``shared/``
folder sits beside the clone (as in CI), the copy must equal the one there.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from servecert.benchmarks import router_bench

BESIDE = Path(__file__).resolve().parents[2].parent / "shared" / "bench" / "openai_load.py"


def test_the_default_load_script_is_inside_the_repository() -> None:
    script = router_bench.default_load_script()
    root = Path(router_bench.__file__).resolve().parents[2]
    assert script.is_file() and script.is_relative_to(root), script


def test_the_load_script_is_unchanged() -> None:
    digest = hashlib.sha256(router_bench.default_load_script().read_bytes()).hexdigest()
    assert digest == router_bench.LOAD_SCRIPT_SHA256, f"servecert/benchmarks/scripts/openai_load.py was edited (sha256 {digest})"


def test_the_copy_equals_the_shared_script_where_it_is_given() -> None:
    if not BESIDE.is_file():
        return  # NB: a clone with nothing beside it: the pinned digest above is the whole check.
    assert router_bench.default_load_script().read_bytes() == BESIDE.read_bytes(), f"{BESIDE} differs from the project's copy"
