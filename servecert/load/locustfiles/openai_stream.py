"""An OpenAI streaming user for locust, and the profile's shape. Runs only inside ``locust -f``.

Configured by the environment ``servecert.load.runner`` sets (read in the ``init`` listener, not at import):
``SERVECERT_LOAD_PROFILE``, ``SERVECERT_LOAD_USERS``, ``SERVECERT_LOAD_DURATION``,
``SERVECERT_LOAD_MODEL``, ``SERVECERT_LOAD_SAMPLES_DIR``, ``SERVECERT_LOAD_SPAWN_RATE``.

Each request is a streaming ``/v1/completions`` with ``min_tokens = max_tokens`` and
``ignore_eos`` (fixed output length). Timing is exact (``servecert.load.sse.StreamTiming``): every request
is written as one JSON line (``servecert.load.metrics.Sample``) to ``samples-<pid>.jsonl``, because
locust's own statistics round response times into buckets. To locust it reports
``completion`` (end-to-end time, ``response_length`` = output tokens, failures by error kind)
and ``ttft`` (time to first token) so the live view shows both.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO, Any

import requests
from gevent import GreenletExit
from locust import HttpUser, LoadTestShape, events, task
from locust.env import Environment

from servecert.load import prompts, sse
from servecert.load.metrics import Sample
from servecert.load.profiles import Profile, get
from servecert.load.shapes import tick
from servecert.load.shapes.trace import TraceEntry, read_jsonl

STATE: dict[str, Any] = {}


class StreamError(Exception):
    """A failed request; the message is its error kind, so locust groups failures by kind."""


def _configure(environment: Environment, **_: Any) -> None:
    profile = get(os.environ.get("SERVECERT_LOAD_PROFILE", "constant"))
    duration = os.environ.get("SERVECERT_LOAD_DURATION")
    profile = profile.with_duration(float(duration) if duration else None)
    STATE["profile"] = profile
    STATE["users"] = int(os.environ.get("SERVECERT_LOAD_USERS") or profile.users)
    STATE["spawn_rate"] = float(os.environ.get("SERVECERT_LOAD_SPAWN_RATE") or 10.0)
    STATE["model"] = os.environ.get("SERVECERT_LOAD_MODEL") or profile.model
    STATE["began"] = time.time()
    folder = Path(os.environ.get("SERVECERT_LOAD_SAMPLES_DIR") or ".")
    folder.mkdir(parents=True, exist_ok=True)
    STATE["samples"] = (folder / f"samples-{os.getpid()}.jsonl").open("a", buffering=1)
    if profile.trace is not None:
        entries = read_jsonl(profile.trace)
        runner = environment.runner
        index, count = (getattr(runner, "worker_index", 0), int(os.environ.get("SERVECERT_LOAD_WORKERS") or 1))
        STATE["trace"] = iter([e for i, e in enumerate(entries) if i % max(1, count) == index % max(1, count)])
        STATE["trace_start"] = entries[0].timestamp_ms if entries else 0.0


def _close(**_: Any) -> None:
    samples: IO[str] | None = STATE.get("samples")
    if samples is not None:
        samples.close()


class OpenAIStreamUser(HttpUser):
    """One client sending streaming completions, paced to ``per_user_rps``."""

    def on_start(self) -> None:
        self.profile: Profile = STATE["profile"]
        self.http = requests.Session()
        self.last_start = time.time()

    def wait_time(self) -> float:
        """Constant throughput: one request every 1/per_user_rps seconds (none to wait when behind); traces: none."""
        if self.profile.trace is not None:
            return 0.0
        return max(0.0, self.last_start + 1.0 / self.profile.per_user_rps - time.time())

    @task
    def complete(self) -> None:
        profile = self.profile
        self.last_start = time.time()
        if profile.trace is None:
            self.send(prompts.unique_prompt(profile.isl), profile.osl)
            return
        entry: TraceEntry | None = next(STATE["trace"], None)
        if entry is None:
            self.stop()
            return
        began = float(getattr(self.environment.runner, "start_time", None) or STATE["began"])
        due = began + (entry.timestamp_ms - STATE["trace_start"]) / 1000 / profile.trace_speedup
        if due > time.time():
            time.sleep(min(due - time.time(), 3600.0))
        self.send(prompts.trace_prompt(entry.hash_ids, entry.input_length, profile.block_tokens), max(1, entry.output_length))

    def send(self, prompt: str, max_tokens: int) -> None:
        body = {"model": STATE["model"], "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
                "ignore_eos": True, "stream": True}
        wall, sent = time.time(), time.perf_counter()
        timing = sse.StreamTiming(sent)
        try:
            with self.http.post(f"{self.host}/v1/completions", json=body, stream=True, timeout=(10, 600)) as resp:
                if resp.status_code != 200:
                    timing.error = sse.HTTP.format(status=resp.status_code)
                else:
                    for line in resp.iter_lines(chunk_size=None):  # type: ignore[call-overload]
                        timing.feed(line, time.perf_counter())
        except requests.RequestException as exc:
            timing.error, timing.error_detail = sse.TRANSPORT, type(exc).__name__
        except GreenletExit:  # NB: the run's stop timeout ran out with this request in flight: counted, not lost
            timing.error = sse.CUT_AT_END
            self.record(wall, sent, prompt, timing)
            raise
        self.record(wall, sent, prompt, timing)

    def record(self, wall: float, sent: float, prompt: str, timing: sse.StreamTiming) -> None:
        end = time.perf_counter()
        timing.finish(end)
        ttft = timing.ttft_s
        tpot = timing.tpot_s
        sample = Sample(
            start=wall,
            ok=not timing.error,
            error=timing.error,
            ttft_ms=None if ttft is None else ttft * 1000,
            tpot_ms=None if tpot is None else tpot * 1000,
            e2e_ms=(end - sent) * 1000,
            output_tokens=timing.tokens,
            input_tokens=len(prompt.split()),
            itl_ms=tuple(x * 1000 for x in timing.itls_s),
        )
        STATE["samples"].write(sample.to_json() + "\n")
        if timing.error == sse.CUT_AT_END:
            return
        fire = self.environment.events.request.fire
        fire(request_type="POST", name="completion", response_time=sample.e2e_ms, response_length=sample.output_tokens,
             exception=StreamError(timing.error) if timing.error else None, context={})
        if ttft is not None:
            fire(request_type="SSE", name="ttft", response_time=ttft * 1000, response_length=0, exception=None, context={})


class ProfileShape(LoadTestShape):
    """The profile's shape as locust's user count over time (``servecert.load.shapes.tick``)."""

    def tick(self) -> tuple[int, float] | None:
        profile: Profile | None = STATE.get("profile")
        if profile is None:
            return None
        if profile.trace is not None:
            return (STATE["users"], STATE["spawn_rate"]) if self._now() < profile.shape.duration_s else None
        return tick(profile.shape, self._now(), STATE["users"], STATE["spawn_rate"])

    def _now(self) -> float:
        return float(self.get_run_time())  # type: ignore[no-untyped-call]


# NB: registered here rather than with decorators: locust's event hooks are untyped.
events.init.add_listener(_configure)  # type: ignore[no-untyped-call]
events.quitting.add_listener(_close)  # type: ignore[no-untyped-call]
