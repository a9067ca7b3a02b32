"""A Downward API volume changes in one step for its reader (servecert/fakes/pod_runner/atomic_dir.py).

The reader here is the fake engine's own (``topology_env.read_files``). The check reads the volume
after every filesystem mutation the writer makes, so it sees each intermediate state a racing
reader could see; a writer that replaces the files one by one (the pod runner before this module)
is shown to be caught.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from servecert.fakes.pod_runner import atomic_dir
from servecert.fakes.topology_env import read_files

Writer = Callable[[Path, Mapping[str, str]], None]

FIRST = {"zone": "z1", "rack": "r1", "host": "h1"}
MOVED = {"zone": "z2", "rack": "r2", "host": "h2"}
GROWN = {"zone": "z2", "rack": "r2", "host": "h2", "block": "b2"}
SHRUNK = {"zone": "z3"}


def one_by_one(base: Path, files: Mapping[str, str]) -> None:
    """Each file replaced atomically on its own: atomic per file, not per volume."""
    base.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        tmp = base / f".{name}.tmp"
        tmp.write_text(content)
        os.replace(tmp, base / name)
    for entry in base.iterdir():
        if entry.name not in files:
            entry.unlink()


def states_seen(monkeypatch: pytest.MonkeyPatch, folder: Path, write: Callable[[], None]) -> list[dict[str, str]]:
    """What ``read_files`` returns after each mutation ``write`` makes, and at the end."""
    seen: list[dict[str, str]] = []

    def observed(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            seen.append(read_files(folder))
            return result
        return call

    for name in ("symlink", "replace", "rename", "unlink"):
        monkeypatch.setattr(os, name, observed(getattr(os, name)))
    monkeypatch.setattr(Path, "unlink", observed(Path.unlink))
    write()
    monkeypatch.undo()
    seen.append(read_files(folder))
    return seen


def each_state_must_be_whole(seen: list[dict[str, str]], before: Mapping[str, str], after: Mapping[str, str]) -> None:
    mixed = [state for state in seen if state not in (dict(before), dict(after))]
    assert not mixed, f"a reader saw a volume that is neither the old payload {before} nor the new {after}: {mixed}"
    assert seen[-1] == dict(after), f"the volume ends as {seen[-1]}, not {after}"


Update = tuple[list[dict[str, str]], dict[str, str], dict[str, str]]  # states seen, payload before, payload after


def updates(write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Update]:
    base = tmp_path / "topology"
    before: dict[str, str] = {}
    for after in (FIRST, MOVED, GROWN, SHRUNK):
        yield states_seen(monkeypatch, base, lambda after=after: write(base, after)), before, after
        before = after


def test_every_reader_sees_the_old_payload_or_the_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for seen, before, after in updates(atomic_dir.write_payload, tmp_path, monkeypatch):
        each_state_must_be_whole(seen, before, after)
    leftovers = sorted(p.name for p in (tmp_path / "topology").iterdir() if p.name.startswith("..") and p.name != atomic_dir.DATA)
    assert len(leftovers) == 1, f"one payload directory should remain, found {leftovers}"


def test_a_writer_that_replaces_files_one_by_one_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="neither the old payload"):
        for seen, before, after in updates(one_by_one, tmp_path, monkeypatch):
            each_state_must_be_whole(seen, before, after)


def test_nested_paths_and_an_unchanged_name_survive_an_update(tmp_path: Path) -> None:
    base = tmp_path / "podinfo"
    atomic_dir.write_payload(base, {"labels": 'a="1"', "sub/name": "w-0"})
    atomic_dir.write_payload(base, {"labels": 'a="2"', "sub/name": "w-0"})
    assert (base / "labels").read_text() == 'a="2"'
    assert (base / "sub" / "name").read_text() == "w-0"
