"""The ground-truth log: what really happened to every request an engine saw.

Conformance verdicts are taken from here, never from an implementation's own report. One record
per request and engine: the role the engine played, the MDC checksum and protocol version the
request arrived with and the engine's own, the KV layout, the KV transfer (both ends, their
topology domains, distance, bytes, priced duration), token counts, timings and outcome. The log
is a bounded ring (oldest records dropped first, and counted) with a sequence number so readers
can poll for what is new.

The ring lives and dies with the engine's process, and a rolling update deletes pods (and the pod
runner their directories) while the suite still has to judge what they served. So a log can also
be mirrored to disk: ``JsonLinesSink`` subscribes to logs and appends every record as one JSON line
(one ``write`` per record, unbuffered, so a line is on disk the moment the record is logged), and
``read_json_lines`` reads one such file or a folder of them back. A process killed mid-write leaves
a truncated line; the reader skips it (logged), and a sink reopening that file starts on a fresh line.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger("servecert.groundtruth")

OK = "ok"
PREFILLED = "prefilled"
ABORTED = "aborted"


@dataclass
class TransferRecord:
    source_engine: str
    dest_engine: str
    source_domains: dict[str, str]
    dest_domains: dict[str, str]
    distance: str
    kv_bytes: int
    duration_ms: float
    source_layout: dict[str, Any]
    dest_layout: dict[str, Any]


@dataclass
class RequestRecord:
    request_id: str
    engine_id: str
    role: str
    model: str
    frontend: str
    mdc_checksum: str | None
    engine_mdc_checksum: str
    protocol_version: str
    engine_protocol_version: str
    kv_layout: dict[str, Any]
    domains: dict[str, str]
    prompt_fingerprint: str = ""
    outcome: str = OK  # OK | PREFILLED | ABORTED | an error code
    error: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    preemptions: int = 0
    arrival: float = 0.0
    first_token_at: float | None = None
    finished_at: float | None = None
    transfer: TransferRecord | None = None
    # Real seconds the engine ran behind its timing model while this request was in it, up to its first token and
    # after it (``servecert.fakes.engine``): the host's delay, counted so a judge can leave it out.
    behind_to_first_token_s: float = 0.0
    behind_after_first_token_s: float = 0.0
    seq: int = field(default=0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GroundTruthLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=capacity)
        self._next_seq = 1
        self.dropped = 0
        self._listeners: list[Callable[[RequestRecord], None]] = []

    def append(self, record: RequestRecord) -> None:
        if self._records.maxlen is not None and len(self._records) == self._records.maxlen:
            self.dropped += 1
        record.seq = self._next_seq
        self._next_seq += 1
        self._records.append(record)
        for listener in self._listeners:
            listener(record)

    def since(self, seq: int = 0) -> list[RequestRecord]:
        return [r for r in self._records if r.seq > seq]

    def subscribe(self, listener: Callable[[RequestRecord], None]) -> None:
        self._listeners.append(listener)

    def __len__(self) -> int:
        return len(self._records)


class JsonLinesSink:
    """Append every record it is given to ``path`` as one JSON line; a listener for ``GroundTruthLog.subscribe``.

    Several logs (``--count`` engines in one process) may share one sink: records carry their
    ``engine_id``. A failing disk never stops the engine: the first error is reported on
    ``errors`` (stderr), later ones are silent, and every record is retried (the disk may recover).
    """

    def __init__(self, path: Path, errors: TextIO | None = None) -> None:
        self.path = path
        self._errors = errors
        self._file: io.FileIO | None = None
        self.reported = False
        self.written = 0
        self._open()

    def __call__(self, record: RequestRecord) -> None:
        self.write(record.to_dict())

    def write(self, item: dict[str, Any]) -> None:
        data = (json.dumps(item, separators=(",", ":")) + "\n").encode()
        if self._file is None and not self._open():
            return
        assert self._file is not None
        try:
            # NB: one write() of the whole line on an O_APPEND descriptor: a reader never sees half a record
            # unless the process dies inside that call (then read_json_lines skips the stub).
            view = memoryview(data)
            while view:
                view = view[self._file.write(view) :]
            self.written += 1
        except OSError as exc:
            self._report(exc)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self) -> bool:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 -- held open for the engine's lifetime
            if os.fstat(self._file.fileno()).st_size > 0 and not _ends_with_newline(self.path):
                self._file.write(b"\n")  # NB: a killed predecessor left a stub: keep our first record off its line.
        except OSError as exc:
            self._report(exc)
            self.close()
            return False
        return True

    def _report(self, exc: OSError) -> None:
        if self.reported:
            return
        self.reported = True
        print(
            f"ground truth: cannot write {self.path}: {exc}; the engine keeps serving, but records from now on may be "
            "missing from that file (fix the path or free the disk; the /groundtruth endpoint still has them)",
            file=self._errors if self._errors is not None else sys.stderr,
            flush=True,
        )


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """Records from one ``.jsonl`` file, or from every ``*.jsonl`` in a folder (sorted by name).

    A missing file or folder reads as no records (an engine that never started writes none). A line
    that is not a JSON object -- the stub a process killed mid-write leaves -- is skipped and logged.
    """
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
    elif path.exists():
        files = [path]
    else:
        return []
    records: list[dict[str, Any]] = []
    for file in files:
        records.extend(_read_one(file))
    return records


def _read_one(file: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with open(file, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                item = None
            if isinstance(item, dict):
                out.append(item)
            else:
                log.warning("%s:%d: skipped a truncated or malformed ground-truth line (%d bytes)", file, number, len(line))
    return out
