"""The YAML examples of the seed documents, as files a user would ``kubectl apply``.

Data flow::

    servecert/harness/seed_examples/<name>.yaml   the seeds' examples, re-indented, content verbatim
        -> names()                        ["clustertopology-my-cluster-topology", "dgd-my-llm-disagg", ...]
        -> path(name) / load(name)        the file, or its single document as a dict

Why files: the suite's promise is that what the seeds show works as shown, so the examples
are kept as the documents users copy, applied unchanged (``kubectl apply -f path(name)``),
and tests derive their invalid variants from ``load(name)`` rather than retyping them.
Each file starts with a comment naming the seed section it comes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLES_DIR = Path(__file__).parent
SUFFIX = ".yaml"


class SeedExampleError(LookupError):
    """No such example, or its file does not hold one mapping; the message lists the known names."""


def names() -> list[str]:
    """Every example's name (its file name without ``.yaml``), sorted."""
    return sorted(p.name.removesuffix(SUFFIX) for p in EXAMPLES_DIR.glob(f"*{SUFFIX}"))


def path(name: str) -> Path:
    """The file of example ``name`` (with or without the ``.yaml`` suffix)."""
    stem = name.removesuffix(SUFFIX)
    candidate = EXAMPLES_DIR / f"{stem}{SUFFIX}"
    if not candidate.is_file():
        raise SeedExampleError(f"no seed example {stem!r} in {EXAMPLES_DIR}; known: {names()}")
    return candidate


def load(name: str) -> dict[str, Any]:
    """Example ``name`` as a fresh dict (callers may mutate it)."""
    file = path(name)
    doc = yaml.safe_load(file.read_text())
    if not isinstance(doc, dict):
        raise SeedExampleError(f"{file} must hold one YAML mapping (a Kubernetes object), got {type(doc).__name__}")
    return doc
