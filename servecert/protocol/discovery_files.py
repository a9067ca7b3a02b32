"""The file discovery format: one JSON file per worker, holding its published metadata.

A worker (or whoever launches it) writes ``<folder>/<engine_id>.json`` atomically when it is
ready and removes it when it stops; a frontend's file backend polls the folder. It lets separate
processes — engines started from a shell, a frontend in another process — find each other
without a discovery service.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def publish(folder: Path, metadata: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{metadata['engine_id']}.json"
    tmp = folder / f".{metadata['engine_id']}.tmp"
    tmp.write_text(json.dumps(metadata))
    tmp.replace(path)
    return path


def unpublish(folder: Path, engine_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (folder / f"{engine_id}.json").unlink()
