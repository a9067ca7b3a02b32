"""How a benchmark hands over its figures: JSON on stdout (progress goes to stderr), and to a file when asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(figures: dict[str, Any], path: Path | None) -> int:
    """Print ``figures`` as JSON, also write them to ``path`` if given; the command's exit status (0)."""
    text = json.dumps(figures, indent=2)
    print(text)
    if path is not None:
        path.write_text(text + "\n")
    return 0
