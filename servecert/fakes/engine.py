"""The core of a fake GPU engine: continuous batching over a KV block pool, in simulated time.

Data flow. A request enters as a ``Seq`` (token ids, sampling, a ``TokenStream`` the HTTP
handler reads) in the waiting queue. One scheduler loop per engine repeats an *iteration*:

1. ``_schedule`` picks work within ``max_num_batched_tokens``: every running sequence first
   (one token for a decoding sequence, a chunk for one still prefilling), then waiting sequences
   up to ``max_num_seqs``, each admitted with the longest cached prefix (prefix caching by
   chained block hashes). When a running sequence needs a block and none is free or evictable,
   the most recently admitted sequence is preempted (LIFO) and later recomputed.
2. The timing model prices the iteration (prefill of T new tokens plus one decode step at the
   current KV utilisation); the loop sleeps that long divided by the time scale (0 = no sleep).
3. ``_complete`` advances every scheduled sequence, registers newly full blocks (KV ``stored``
   events), and emits a token for each sequence whose context is fully computed. A prefill-role
   engine instead pins the sequence's blocks under a ``KvHandle`` for a decode engine to pull.
   With ``spec_accept_length`` > 1 (speculative decoding) a decode step also emits the draft
   tokens it accepted: floor or ceil of the accept length in all, drawn per request so the mean is
   the configured value, priced as one step; ``vllm:spec_decode_*`` counters record the drafts.
4. A forward-pass-metrics record is published per iteration (and an idle heartbeat).

The engine also counts how far it ran behind its own timing model (``behind_s``): an iteration
that took longer, from the end of the last one, than its priced time divided by the time scale
was late by the difference: the host did not run the loop when the model said (CPU starvation,
or the suite's own work in the same process), which no implementation caused. Each request's
ground-truth record carries the lateness of the iterations it waited or ran through, split at its
first token (``behind_to_first_token_s``, ``behind_after_first_token_s``), so a judge can count
what the harness itself delayed instead of failing a correct implementation for it. The engines
still use CPU exactly as before: nothing here catches up. An injected stall is not counted.

Request admission (model card checksum, runtime protocol, role) happens before a ``Seq`` is made,
in ``admit``, so a mismatched request never touches the pool. Every request ends with one
ground-truth record. Nothing here does network I/O: the HTTP layer (``servecert.fakes.server``) and KV
pulls between engines live elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from servecert.fakes import faults as faults_mod
from servecert.fakes import groundtruth, metrics, network, timing
from servecert.fakes.kv_pool import KvPool
from servecert.fakes.topology_env import TopologyConfig
from servecert.protocol import engine_api, event_loop, streams, tokenizer, waiting
from servecert.protocol.card import ModelCard
from servecert.protocol.engine_api import EngineRequest, KvHandle, Sampling
from servecert.protocol.layout import KvLayout

ROLES = ("agg", "prefill", "decode")
INSTANT_ITERATIONS_PER_TURN = 4  # time scale 0: iterations run back to back before yielding
BLOCKED_RECHECK_SECONDS = 0.05  # real seconds between retries when nothing fits
MAX_ACCEPT_LENGTH = 8.0  # speculative decoding: at most 7 draft tokens per step


@dataclass
class EngineConfig:
    model: str = "fake-model"
    role: str = "agg"
    engine_id: str = ""
    namespace: str = "dynamo"
    time_scale: float = 1.0  # simulated seconds per real second; 0 = no delays at all
    block_size: int = 16
    num_gpu_blocks: int = 16384
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    context_length: int = 8192
    tensor_parallel_size: int = 1
    dtype: str = "fp16"
    engine_version: str = "1"
    protocol_version: str = engine_api.RUNTIME_PROTOCOL_VERSION
    kv_bytes_per_token: int = 131072  # 32 layers x 2 x 8 kv heads x 128 dims x 2 bytes
    spec_accept_length: float = 1.0  # speculative decoding: tokens one decode step emits on average (1 = none)
    eos_rate: float = 1 / 64  # chance a sampled token is EOS once min_tokens is reached (never the first token)
    handle_ttl_seconds: float = 60.0  # real seconds a prefilled KV waits for its pull
    heartbeat_seconds: float = 1.0  # real seconds between idle forward-pass records
    timing: timing.TimingModel = field(default_factory=timing.Polynomial)
    network: network.FakeNetwork = field(default_factory=network.FakeNetwork)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    faults: faults_mod.Faults = field(default_factory=faults_mod.Faults)
    pd_protocol: str = engine_api.PD_SERVECERT
    """How P/D routers hand requests over on the OpenAI routes: ``servecert`` (none), ``vllm``, ``sglang`` (``servecert.fakes.pd_wire``)."""
    tokenizer: str = tokenizer.TOKENIZER_NAME
    """The model card's tokenizer (``servecert.protocol.tokenizer.KNOWN``): words-v1 for the suite, bytes-v1 for real clients."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if self.pd_protocol not in engine_api.PD_PROTOCOLS:
            raise ValueError(f"pd_protocol must be one of {engine_api.PD_PROTOCOLS}, got {self.pd_protocol!r}")
        if self.time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        tokenizer.by_name(self.tokenizer)
        for name in ("block_size", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens", "context_length"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if not 1.0 <= self.spec_accept_length <= MAX_ACCEPT_LENGTH:
            raise ValueError(f"spec_accept_length is tokens per decode step, in [1, {MAX_ACCEPT_LENGTH:g}]; got {self.spec_accept_length}")


class EngineError(Exception):
    """A request the engine refuses, with its runtime error code and HTTP status."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status if status is not None else engine_api.ERROR_STATUS.get(code, 400)


class TokenStream:
    """Tokens of one request on their way from the scheduler loop to an HTTP handler."""

    __slots__ = ("_event", "done", "error", "finish_reason", "handle", "tokens")

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._event = asyncio.Event()
        self.done = False
        self.finish_reason: str | None = None
        self.error: EngineError | None = None
        self.handle: KvHandle | None = None

    def push(self, token: int) -> None:
        self.tokens.append(token)
        self._event.set()

    def finish(self, reason: str) -> None:
        self.done, self.finish_reason = True, reason
        self._event.set()

    def fail(self, error: EngineError) -> None:
        self.done, self.error = True, error
        self._event.set()

    async def next_tokens(self) -> list[int]:
        """Wait for new tokens or the end; returns the tokens not yet read (maybe empty at the end)."""
        if not self.tokens and not self.done:
            self._event.clear()
            await self._event.wait()
        out, self.tokens = self.tokens, []
        return out


class Seq:
    """One request inside the engine."""

    __slots__ = (
        "admitted_once",
        "arrival",
        "behind_at_arrival",
        "behind_at_first_token",
        "blocks",
        "first_token_at",
        "generated",
        "last_hash",
        "last_token_at",
        "num_computed",
        "prefill_only",
        "prompt_len",
        "record",
        "registered",
        "request_id",
        "rng",
        "sampling",
        "scheduled_at",
        "stream",
        "text",
        "tokens",
    )

    def __init__(self, req: EngineRequest, prefill_only: bool, record: groundtruth.RequestRecord) -> None:
        self.request_id = req.request_id
        self.tokens: list[int] = list(req.token_ids)
        self.prompt_len = len(self.tokens)
        self.sampling: Sampling = req.sampling
        seed = req.sampling.seed if req.sampling.seed is not None else hash(tuple(req.token_ids[:64]))
        self.rng = random.Random(seed)
        self.generated = 0
        self.blocks: list[int] = []
        self.registered = 0
        self.last_hash = 0
        self.num_computed = 0
        self.prefill_only = prefill_only
        self.stream = TokenStream()
        self.record = record
        self.arrival = time.monotonic()
        self.scheduled_at: float | None = None
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.text = ""
        self.admitted_once = False
        self.behind_at_arrival = 0.0
        self.behind_at_first_token: float | None = None


class Engine:
    """One fake engine; ``start`` runs its scheduler loop, ``admit`` feeds it requests."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.engine_id = config.engine_id or f"{config.role}-{uuid.uuid4().hex[:8]}"
        self.url = ""  # set by whoever serves it over HTTP
        self.tokenizer = tokenizer.by_name(config.tokenizer)
        self.card = ModelCard(
            served_model_name=config.model,
            tokenizer=config.tokenizer,
            context_length=config.context_length,
            block_size=config.block_size,
            worker_type=config.role,
        )
        self.checksum = self.card.checksum()
        self.layout = KvLayout(config.block_size, config.tensor_parallel_size, config.dtype, config.engine_version)
        self.pool = KvPool(config.num_gpu_blocks, config.block_size, self._on_kv_event)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.log = groundtruth.GroundTruthLog()
        self.faults = faults_mod.FaultState(config.faults)
        self.metrics = metrics.EngineMetrics(config.model, lambda: len(self.running), lambda: len(self.waiting), self.pool.usage)
        self.kv_events: deque[streams.KvEvent] = deque(maxlen=65536)
        self.kv_listeners: list[Callable[[streams.KvEvent], None]] = []
        self.fpm_listeners: list[Callable[[streams.ForwardPassMetrics], None]] = []
        self.on_crash: Callable[[Engine], None] | None = None
        self.crashed = False
        self.model_load = waiting.Deadline(config.faults.startup_seconds)
        """The model load (``startup_seconds``): the engine is ready once it has expired."""
        self._handles: dict[str, tuple[Seq, waiting.Deadline]] = {}
        """Prefilled KV pinned for a decode to pull: handle id -> (sequence, its TTL from the pin)."""
        self._event_ids = itertools.count(1)
        self._counter = itertools.count(1)
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._stall_pending = False
        self.behind_s = 0.0
        """Real seconds the loop has run behind its timing model since it started (see the module docstring)."""
        self._cycle_mark: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return not self.crashed and self.model_load.expired

    @property
    def domains(self) -> dict[str, str]:
        return dict(self.config.topology.domains)

    def handles_pinned_within(self, seconds: float) -> int:
        """Prefilled KV handles pinned in the last ``seconds`` and not yet pulled (a draining server waits for them)."""
        return sum(1 for _, pin in self._handles.values() if pin.elapsed() < seconds)

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"engine-{self.engine_id}")

    async def stop(self) -> None:
        # NB: Python 3.11's wait_for can swallow a cancel that lands as the loop is woken; the flag ends the loop anyway.
        self._stopping = True
        self._wake.set()
        await event_loop.cancel(self._task)
        self._task = None
        for seq in [*self.running, *self.waiting]:
            seq.stream.fail(EngineError(engine_api.ENGINE_UNAVAILABLE, "engine stopped"))

    def crash(self) -> None:
        """Die as a real engine would: every request in flight is cut, nothing more is served."""
        if self.crashed:
            return
        self.crashed = True
        for seq in [*self.running, *self.waiting]:
            self._end(seq, engine_api.ENGINE_UNAVAILABLE, "engine crashed")
            seq.stream.fail(EngineError(engine_api.ENGINE_UNAVAILABLE, "engine crashed"))
        self.running.clear()
        self.waiting.clear()
        if self.on_crash is not None:
            self.on_crash(self)

    def metadata(self) -> dict[str, object]:
        """What the engine publishes to discovery: card, layout, runtime config with topology."""
        return {
            "engine_id": self.engine_id,
            "url": self.url,
            "namespace": self.config.namespace,
            "role": self.config.role,
            "card": self.card.to_dict(),
            "protocol_version": self.config.protocol_version,
            "kv_layout": self.layout.to_dict(),
            "runtime_config": {
                **self.config.topology.to_dict(),
                "total_kv_blocks": self.config.num_gpu_blocks,
                "max_num_seqs": self.config.max_num_seqs,
                "max_num_batched_tokens": self.config.max_num_batched_tokens,
                "kv_bytes_per_token": self.config.kv_bytes_per_token,
            },
        }

    # -- admission ---------------------------------------------------------------------------
    def new_record(self, req: EngineRequest) -> groundtruth.RequestRecord:
        return groundtruth.RequestRecord(
            request_id=req.request_id,
            engine_id=self.engine_id,
            role=self.config.role,
            model=req.model,
            frontend=req.frontend,
            mdc_checksum=req.mdc_checksum,
            engine_mdc_checksum=self.checksum,
            protocol_version=req.protocol_version,
            engine_protocol_version=self.config.protocol_version,
            kv_layout=self.layout.to_dict(),
            domains=self.domains,
            prompt_fingerprint=tokenizer.fingerprint(req.token_ids),
            prompt_tokens=len(req.token_ids),
            arrival=time.time(),
        )

    def check(self, req: EngineRequest, prefill: bool) -> None:
        """Refuse what a real worker would refuse, before any work is done."""
        if self.crashed or not self.ready:
            raise EngineError(engine_api.ENGINE_UNAVAILABLE, f"engine {self.engine_id} is not ready")
        if req.protocol_version != self.config.protocol_version:
            raise EngineError(
                engine_api.RUNTIME_PROTOCOL_MISMATCH,
                f"runtime protocol mismatch: request speaks version {req.protocol_version!r}, "
                f"worker {self.engine_id} speaks {self.config.protocol_version!r}",
            )
        if req.mdc_checksum is not None and req.mdc_checksum != self.checksum:
            raise EngineError(
                engine_api.MDC_CHECKSUM_MISMATCH,
                f"request was preprocessed with model card {req.mdc_checksum} but worker {self.engine_id} "
                f"serves card {self.checksum} (model {self.card.served_model_name}, block_size "
                f"{self.card.block_size}, context_length {self.card.context_length}, worker_type {self.card.worker_type})",
            )
        if req.model != self.config.model:
            raise EngineError("model_not_found", f"worker serves model {self.config.model!r}, not {req.model!r}", 404)
        if prefill != (self.config.role == "prefill"):
            want = "/engine/prefill" if self.config.role == "prefill" else "/engine/generate"
            raise EngineError(engine_api.WRONG_ROLE, f"worker {self.engine_id} is a {self.config.role} worker: use {want}")
        if not req.token_ids:
            raise EngineError("invalid_request", "token_ids is empty")
        total = len(req.token_ids) + req.sampling.max_tokens
        capacity = self.config.num_gpu_blocks * self.config.block_size
        if total > capacity:
            raise EngineError(
                "kv_capacity_exceeded",
                f"the request needs up to {total} tokens of KV cache but this worker holds {capacity} "
                f"({self.config.num_gpu_blocks} blocks of {self.config.block_size})",
            )
        if not self.config.enable_chunked_prefill and len(req.token_ids) > self.config.max_num_batched_tokens:
            raise EngineError(
                "invalid_request",
                f"the prompt has {len(req.token_ids)} tokens, more than max_num_batched_tokens="
                f"{self.config.max_num_batched_tokens}, and chunked prefill is off",
            )
        if total > self.config.context_length:
            raise EngineError(
                "context_length_exceeded",
                f"this model's maximum context length is {self.config.context_length} tokens; the request has "
                f"{len(req.token_ids)} prompt tokens and asks for {req.sampling.max_tokens} more",
            )

    def admit(self, req: EngineRequest, record: groundtruth.RequestRecord, preloaded: KvHandle | None = None) -> Seq:
        """Queue a checked request; with ``preloaded`` its prompt KV arrived by transfer."""
        fail, crash, stall = self.faults.on_accept()
        if crash:
            self.crash()
            raise EngineError(engine_api.ENGINE_UNAVAILABLE, f"engine {self.engine_id} crashed")
        if fail:
            record.outcome, record.error = engine_api.INJECTED_ERROR, "injected failure"
            record.finished_at = time.time()
            self.log.append(record)
            raise EngineError(engine_api.INJECTED_ERROR, "injected failure (fault injection)")
        self._stall_pending = self._stall_pending or stall
        seq = Seq(req, prefill_only=self.config.role == "prefill", record=record)
        seq.behind_at_arrival = self.behind_s
        if preloaded is not None:
            seq.tokens.append(preloaded.first_token)
            seq.num_computed = seq.prompt_len
            seq.admitted_once = True
            self._emit(seq, preloaded.first_token, time.monotonic())
        if not seq.stream.done:
            self.waiting.append(seq)
            self._wake.set()
        return seq

    def abort(self, seq: Seq) -> None:
        """The client went away: free the sequence's blocks and record it."""
        if seq.stream.done:
            return
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.pool.release(seq.blocks)
        seq.blocks = []
        self._end(seq, groundtruth.ABORTED, "client disconnected")
        seq.stream.finish("abort")

    def cut(self, seq: Seq, delivered: int, reason: str) -> None:
        """The stream to the client was cut after ``delivered`` tokens, finished or not: record the truth."""
        self.abort(seq)
        record = seq.record
        record.outcome, record.error, record.completion_tokens = groundtruth.ABORTED, reason, delivered

    # -- KV handles (prefill side) ---------------------------------------------------------------
    def release_handle(self, handle_id: str, dest_layout: KvLayout) -> Seq:
        entry = self._handles.get(handle_id)
        if entry is None:
            raise EngineError(engine_api.KV_HANDLE_NOT_FOUND, f"no KV handle {handle_id} on {self.engine_id}")
        seq = entry[0]
        problems = self.layout.incompatibilities(dest_layout)
        if problems:
            raise EngineError(
                engine_api.KV_LAYOUT_MISMATCH,
                f"KV layout mismatch between {self.engine_id} and the receiver: {'; '.join(problems)}",
            )
        del self._handles[handle_id]
        self.pool.release(seq.blocks)
        seq.blocks = []
        self._wake.set()
        return seq

    def _expire_handles(self) -> None:
        for handle_id, (seq, pin) in list(self._handles.items()):
            if pin.expired:
                del self._handles[handle_id]
                self.pool.release(seq.blocks)
                seq.blocks = []

    # -- the scheduler loop -----------------------------------------------------------------------
    async def _loop(self) -> None:
        cfg = self.config
        while not self._stopping:
            if not self.running and not self.waiting:
                self._cycle_mark = None
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=cfg.heartbeat_seconds)
                except TimeoutError:
                    self._publish_fpm([], [], 0.0)
                    self._expire_handles()
                continue
            if self._stall_pending:
                self._stall_pending = False
                await asyncio.sleep(self.faults.faults.stall_seconds)
                self._cycle_mark = None  # NB: an injected stall is the test's, not lateness of the host
            if cfg.time_scale > 0:
                started = time.monotonic() if self._cycle_mark is None else self._cycle_mark
                plan = self._schedule()
                if not plan:
                    await self._idle_wait()
                    self._cycle_mark = None
                    continue
                prefill_ns, decode_kvs = _classify(plan)
                ms = self._iteration_ms(sum(prefill_ns), bool(decode_kvs))
                if ms > 0:
                    await asyncio.sleep(ms / 1000.0 / cfg.time_scale)
                if self.crashed:
                    return
                self._count_lateness(started, ms / 1000.0 / cfg.time_scale)
                self._complete(plan)
                self._publish_fpm(prefill_ns, decode_kvs, ms)
            else:
                # NB: with no simulated time, run a few iterations per turn of the event loop so that
                # handlers write several tokens (still one SSE event each) per send().
                for _ in range(INSTANT_ITERATIONS_PER_TURN):
                    plan = self._schedule()
                    if not plan:
                        await self._idle_wait()
                        break
                    prefill_ns, decode_kvs = _classify(plan)
                    ms = self._iteration_ms(sum(prefill_ns), bool(decode_kvs))
                    self._complete(plan)
                    self._publish_fpm(prefill_ns, decode_kvs, ms)
                    if not self.running and not self.waiting:
                        break
                await asyncio.sleep(0)
                if self.crashed:
                    return
            if self._handles:
                self._expire_handles()

    def _count_lateness(self, started: float, priced_s: float) -> None:
        """Add how much longer than priced this iteration took, from the end of the last busy one (or from when the
        loop found work) to now; the next iteration is measured from now, so the CPU that completing this one takes
        (emitting tokens, publishing) counts in the next."""
        now = time.monotonic()
        self.behind_s += max(0.0, now - started - priced_s)
        self._cycle_mark = now

    async def _idle_wait(self) -> None:
        """Nothing could be scheduled (the pool is held by pinned KV): wait for a change, bounded."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=BLOCKED_RECHECK_SECONDS)
        self._expire_handles()

    def _schedule(self) -> list[tuple[Seq, int]]:
        cfg = self.config
        budget = cfg.max_num_batched_tokens
        plan: list[tuple[Seq, int]] = []
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(len(seq.tokens) - seq.num_computed, budget)
            if self._grow(seq, seq.num_computed + n):
                plan.append((seq, n))
                budget -= n
                i += 1
                continue
            victim = self.running.pop()
            self._preempt(victim)
            if victim is seq:
                break
        preempted = len(plan) < len(self.running)
        while self.waiting and not preempted and budget > 0 and len(self.running) < cfg.max_num_seqs:
            seq = self.waiting[0]
            n = self._admission_tokens(seq, budget)
            if n <= 0 or not self._grow(seq, seq.num_computed + n):
                self._undo_prefix(seq)
                break
            self.waiting.popleft()
            self.running.append(seq)
            if not seq.admitted_once:
                self._count_prefix_query(seq)
            if seq.scheduled_at is None:
                seq.scheduled_at = time.monotonic()
            plan.append((seq, n))
            budget -= n
        return plan

    def _admission_tokens(self, seq: Seq, budget: int) -> int:
        if seq.num_computed == 0 and not seq.blocks and self.config.enable_prefix_caching:
            self._match_prefix(seq)
        need = len(seq.tokens) - seq.num_computed
        if need > budget and not self.config.enable_chunked_prefill:
            return 0
        return min(need, budget)

    def _match_prefix(self, seq: Seq) -> None:
        bs = self.config.block_size
        usable = (len(seq.tokens) - 1) // bs  # at least one token must be computed to sample
        hashes = tokenizer.block_hashes(seq.tokens[: usable * bs], bs)
        blocks = self.pool.match_prefix(hashes)
        seq.blocks = blocks
        seq.registered = len(blocks)
        seq.last_hash = hashes[len(blocks) - 1] if blocks else 0
        seq.num_computed = len(blocks) * bs

    def _count_prefix_query(self, seq: Seq) -> None:
        seq.admitted_once = True
        seq.record.cached_tokens = seq.num_computed
        if self.config.enable_prefix_caching:
            self.pool.record_query(seq.prompt_len, seq.num_computed)
            self.metrics.prefix_queries.inc(seq.prompt_len)
            self.metrics.prefix_hits.inc(seq.num_computed)

    def _undo_prefix(self, seq: Seq) -> None:
        if seq.blocks:
            self.pool.release(seq.blocks)
        seq.blocks, seq.registered, seq.last_hash, seq.num_computed = [], 0, 0, 0

    def _grow(self, seq: Seq, tokens: int) -> bool:
        """Make ``seq`` hold enough blocks for ``tokens`` tokens; False when the pool cannot."""
        need = -(-tokens // self.config.block_size) - len(seq.blocks)
        if need <= 0:
            return True
        if not self.pool.can_allocate(need):
            return False
        seq.blocks.extend(self.pool.allocate(need))
        return True

    def _preempt(self, seq: Seq) -> None:
        """Free a running sequence's blocks; it goes back to the front of the queue for recompute."""
        self.pool.release(seq.blocks)
        seq.blocks, seq.registered, seq.last_hash, seq.num_computed = [], 0, 0, 0
        seq.admitted_once = True
        seq.record.preemptions += 1
        self.metrics.preemptions.inc()
        self.waiting.appendleft(seq)

    def _iteration_ms(self, prefill_tokens: int, decoding: bool) -> float:
        ms = self.config.timing.prefill_ms(prefill_tokens)
        if decoding:
            active = sum(len(s.tokens) for s in self.running)
            ms += self.config.timing.decode_ms(active / (self.pool.num_blocks * self.pool.block_size), active)
        return ms

    def _complete(self, plan: list[tuple[Seq, int]]) -> None:
        now = time.monotonic()
        bs = self.config.block_size
        for seq, n in plan:
            if seq.stream.done:  # aborted while the iteration ran
                continue
            seq.num_computed += n
            while (seq.registered + 1) * bs <= seq.num_computed:
                self._register_block(seq, bs)
            if seq.num_computed < len(seq.tokens):
                continue
            if seq.prefill_only:
                self._finish_prefill(seq, now)
            else:
                decoding = n == 1 and seq.generated > 0
                self._emit(seq, self._sample(seq), now)
                if decoding and self.config.spec_accept_length > 1.0:
                    self._speculate(seq, now)
        if any(s.stream.done for s in self.running):
            self.running = [s for s in self.running if not s.stream.done]

    def _speculate(self, seq: Seq, now: float) -> None:
        """Speculative decoding: the step verified a draft and emits its accepted tokens too, so a step yields
        ``spec_accept_length`` tokens on average (floor or ceil of it, drawn from the request's own generator)."""
        accept = self.config.spec_accept_length
        proposed = math.ceil(accept) - 1
        extra = math.floor(accept) - 1 + (1 if seq.rng.random() < accept - math.floor(accept) else 0)
        self.metrics.spec_drafts.inc()
        self.metrics.spec_draft_tokens.inc(proposed)
        bs = self.config.block_size
        accepted = 0
        for _ in range(extra):
            if seq.stream.done or not self._grow(seq, seq.num_computed + 1):
                break
            seq.num_computed += 1
            while (seq.registered + 1) * bs <= seq.num_computed:
                self._register_block(seq, bs)
            self._emit(seq, self._sample(seq), now)
            accepted += 1
        self.metrics.spec_accepted.inc(accepted)

    def _register_block(self, seq: Seq, bs: int) -> None:
        start = seq.registered * bs
        block_hash = hash((seq.last_hash, *seq.tokens[start : start + bs]))
        parent = seq.last_hash or None
        if self.config.enable_prefix_caching:
            seq.blocks[seq.registered] = self.pool.register(seq.blocks[seq.registered], block_hash, parent)
        seq.last_hash = block_hash
        seq.registered += 1

    def _sample(self, seq: Seq) -> int:
        s = seq.sampling
        # NB: never as the first token: a real model answers with one at least, as a prefill worker's first token is never
        # EOS; an empty answer is an error to AIPerf ("No responses with actual content"), 1 in 64 of its requests here.
        if not s.ignore_eos and seq.generated >= s.min_tokens and seq.rng.random() < self.config.eos_rate and seq.generated:
            return tokenizer.EOS_ID
        return self.tokenizer.generate(seq.rng)

    def _emit(self, seq: Seq, token: int, now: float) -> None:
        m = self.metrics
        if token == tokenizer.EOS_ID:
            self._finish(seq, "stop", now)
            return
        s = seq.sampling
        if s.stop and seq.generated >= s.min_tokens:
            # NB: the token that completes a stop string is withheld whole (tokens are whole words).
            text = seq.text + self.tokenizer.decode_token(token)
            if any(stop in text for stop in s.stop):
                self._finish(seq, "stop", now)
                return
            seq.text = text
        seq.generated += 1
        if seq.first_token_at is None:
            seq.first_token_at = now
            seq.behind_at_first_token = self.behind_s
            m.ttft.observe(now - seq.arrival)
        elif seq.last_token_at is not None:
            m.itl.observe(now - seq.last_token_at)
        seq.last_token_at = now
        if len(seq.tokens) == seq.num_computed:  # a freshly sampled token (not a transferred first token)
            seq.tokens.append(token)
        seq.stream.push(token)
        if seq.generated >= s.max_tokens:
            self._finish(seq, "length", now)

    def _finish(self, seq: Seq, reason: str, now: float) -> None:
        m = self.metrics
        m.e2e.observe(now - seq.arrival)
        m.req_gen.observe(seq.generated)
        m.req_prompt.observe(seq.prompt_len)
        m.prompt_tokens.inc(seq.prompt_len - seq.record.cached_tokens)
        m.generation_tokens.inc(seq.generated)
        if seq.scheduled_at is not None:
            m.queue.observe(seq.scheduled_at - seq.arrival)
        if seq.first_token_at is not None:
            m.prefill_time.observe(seq.first_token_at - (seq.scheduled_at or seq.arrival))
            m.decode_time.observe(now - seq.first_token_at)
            if seq.generated > 1:
                m.tpot.observe((now - seq.first_token_at) / (seq.generated - 1))
        m.success(reason)
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.record.finish_reason = reason
        self._end(seq, groundtruth.OK, "")
        seq.stream.finish(reason)

    def _finish_prefill(self, seq: Seq, now: float) -> None:
        first = self._sample(seq)
        if first == tokenizer.EOS_ID:  # a prefill worker always hands over a real first token
            first = self.tokenizer.first_token
        handle = KvHandle(
            handle_id=uuid.uuid4().hex,
            engine_id=self.engine_id,
            url=self.url,
            num_tokens=seq.prompt_len,
            first_token=first,
            kv_bytes=seq.prompt_len * self.config.kv_bytes_per_token,
            layout=self.layout.to_dict(),
            domains=self.domains,
        )
        self._handles[handle.handle_id] = (seq, waiting.Deadline(self.config.handle_ttl_seconds))
        self.metrics.ttft.observe(now - seq.arrival)
        self.metrics.prompt_tokens.inc(seq.prompt_len - seq.record.cached_tokens)
        seq.first_token_at = now
        seq.behind_at_first_token = self.behind_s
        seq.stream.handle = handle
        seq.record.finish_reason = "prefilled"
        self._end(seq, groundtruth.PREFILLED, "")
        seq.stream.finish("prefilled")

    def _end(self, seq: Seq, outcome: str, error: str) -> None:
        rec = seq.record
        rec.outcome, rec.error = outcome, error
        rec.completion_tokens = seq.generated
        rec.finished_at = time.time()
        if seq.first_token_at is not None:
            rec.first_token_at = rec.arrival + (seq.first_token_at - seq.arrival)
        first = self.behind_s if seq.behind_at_first_token is None else seq.behind_at_first_token
        rec.behind_to_first_token_s = first - seq.behind_at_arrival
        rec.behind_after_first_token_s = self.behind_s - first
        self.log.append(rec)

    # -- published streams ------------------------------------------------------------------------
    def _on_kv_event(self, kind: str, hashes: tuple[int, ...], parent: int | None) -> None:
        if self.config.role == "decode":
            return  # decode workers publish no KV events (as in Dynamo)
        event = streams.KvEvent(self.engine_id, next(self._event_ids), kind, hashes, parent)
        self.kv_events.append(event)
        for listener in self.kv_listeners:
            listener(event)

    def _publish_fpm(self, prefill_ns: list[int], decode_kvs: list[int], ms: float) -> None:
        if not self.fpm_listeners:
            return
        queued = [len(s.tokens) - s.num_computed for s in self.waiting]
        record = streams.ForwardPassMetrics(
            worker_id=self.engine_id,
            counter_id=next(self._counter),
            wall_time=ms / 1000.0,
            scheduled_requests=_sums(prefill_ns, decode_kvs),
            queued_requests=_sums(queued, []),
            kv_active_blocks=self.pool.active_blocks,
            kv_total_blocks=self.pool.num_blocks,
        )
        for listener in self.fpm_listeners:
            listener(record)


def _classify(plan: list[tuple[Seq, int]]) -> tuple[list[int], list[int]]:
    """Split an iteration's work into prefill chunk sizes and the context lengths being decoded."""
    prefill: list[int] = []
    decode: list[int] = []
    for seq, n in plan:
        if n == 1 and seq.num_computed == len(seq.tokens) - 1 and len(seq.tokens) > seq.prompt_len:
            decode.append(len(seq.tokens))
        else:
            prefill.append(n)
    return prefill, decode


def _sums(prefill: list[int], decode: list[int]) -> streams.RequestSums:
    return streams.RequestSums(
        num_prefill_requests=len(prefill),
        sum_prefill_tokens=sum(prefill),
        var_prefill_length=_var(prefill),
        num_decode_requests=len(decode),
        sum_decode_kv_tokens=sum(decode),
        var_decode_kv_tokens=_var(decode),
    )


def _var(xs: list[int]) -> float:
    if len(xs) < 2:
        return 0.0
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs) / len(xs)
