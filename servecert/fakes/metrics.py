"""Prometheus metrics of one fake engine, under vLLM's names.

Each engine has its own registry (many engines share a process). Gauges are read at scrape time
from the engine's state, so the scheduler loop does no gauge bookkeeping; counters and
histograms are updated as requests progress. The names are vLLM's, so tools that scrape vLLM
(routers, autoscalers, load tools) work unchanged against a fake.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)


class EngineMetrics:
    def __init__(
        self,
        model: str,
        running: Callable[[], float],
        waiting: Callable[[], float],
        kv_usage: Callable[[], float],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r, labels = self.registry, ["model_name"]
        Gauge("vllm:num_requests_running", "Requests in the running batch", labels, registry=r).labels(model).set_function(running)
        Gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled", labels, registry=r).labels(model).set_function(waiting)
        Gauge("vllm:kv_cache_usage_perc", "KV cache usage, 0..1", labels, registry=r).labels(model).set_function(kv_usage)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r)

        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache").labels(model)
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache").labels(model)
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefilled prompt tokens").labels(model)
        self.generation_tokens = counter("vllm:generation_tokens", "Generated tokens").labels(model)
        self.preemptions = counter("vllm:num_preemptions", "Preempted sequences").labels(model)
        self.spec_drafts = counter("vllm:spec_decode_num_drafts", "Speculative drafts verified").labels(model)
        self.spec_draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Draft tokens proposed").labels(model)
        self.spec_accepted = counter("vllm:spec_decode_num_accepted_tokens", "Draft tokens accepted").labels(model)
        self._success = Counter("vllm:request_success", "Finished requests", [*labels, "finished_reason"], registry=r)
        self._model = model
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token", _LATENCY_BUCKETS).labels(model)
        self.itl = histogram("vllm:inter_token_latency_seconds", "Time between tokens", _ITL_BUCKETS).labels(model)
        self.tpot = histogram("vllm:request_time_per_output_token_seconds", "Decode time per output token", _ITL_BUCKETS).labels(model)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency", _LATENCY_BUCKETS).labels(model)
        self.queue = histogram("vllm:request_queue_time_seconds", "Time waiting before first scheduled", _LATENCY_BUCKETS).labels(model)
        self.prefill_time = histogram("vllm:request_prefill_time_seconds", "Prefill phase time", _LATENCY_BUCKETS).labels(model)
        self.decode_time = histogram("vllm:request_decode_time_seconds", "Decode phase time", _LATENCY_BUCKETS).labels(model)
        self.req_prompt = histogram("vllm:request_prompt_tokens", "Prompt tokens per request", _TOKEN_BUCKETS).labels(model)
        self.req_gen = histogram("vllm:request_generation_tokens", "Generated tokens per request", _TOKEN_BUCKETS).labels(model)

    def success(self, finish_reason: str) -> None:
        self._success.labels(self._model, finish_reason).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
