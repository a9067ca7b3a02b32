"""Write a volume's whole payload at once, the way kubelet's AtomicWriter does.

Data flow::

    files {relative path: content}
      -> <base>/..<n>/            every file written here, out of sight (hidden name)
      -> <base>/<top> -> ..data/<top>   one symlink per top-level name, made before the swap
      -> <base>/..data_tmp -> ..<n>, renamed over <base>/..data   (the one atomic step)
      -> stale top-level symlinks and the previous ..<m> directory removed

Why: a reader that lists the volume must see the old payload or the new one, never a mix. Files
written one by one broke that: a fake engine waiting for its ``rack`` topology file read the
volume after ``zone`` and ``rack`` were written but before ``host`` was, and registered without a
host (a flake in ``RouterTopologyFallbackRoutesAnywhere``). kubelet swaps a ``..data`` symlink
(``pkg/volume/util/atomic_writer.go``); here the user-visible links are made *before* the swap, so
a name that is new in this payload dangles (and reads as absent) until the swap makes every name
resolve at once. ``read_snapshot`` reads through ``..data`` once, so even a reader that races an
update sees one payload.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

DATA = "..data"
_TMP_LINK = "..data_tmp"
_serial = itertools.count()


def write_payload(base: Path, files: Mapping[str, str]) -> None:
    """Replace the payload under ``base`` with ``files`` so that readers see it change at once."""
    base.mkdir(parents=True, exist_ok=True)
    previous = _current_dir(base)
    fresh = base / f"..{os.getpid()}_{next(_serial)}"
    for rel, content in files.items():
        target = fresh / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    fresh.mkdir(exist_ok=True)
    tops = {Path(rel).parts[0] for rel in files}
    for top in sorted(tops):
        link = base / top
        if not link.is_symlink():
            _remove(link)
            os.symlink(f"{DATA}/{top}", link)
    tmp = base / _TMP_LINK
    _remove(tmp)
    os.symlink(fresh.name, tmp)
    os.replace(tmp, base / DATA)
    for entry in base.iterdir():
        if not entry.name.startswith(".") and entry.name not in tops:
            _remove(entry)
    if previous is not None and previous != fresh:
        shutil.rmtree(previous, ignore_errors=True)


def read_snapshot(folder: Path) -> Path:
    """The directory to read ``folder``'s files from: its current payload when it is atomic."""
    data = folder / DATA
    return data.resolve() if data.is_symlink() else folder


def _current_dir(base: Path) -> Path | None:
    data = base / DATA
    return base / os.readlink(data) if data.is_symlink() else None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
