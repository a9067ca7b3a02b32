"""``servecert bench clients``: real benchmark clients (NVIDIA AIPerf; GuideLLM when installed) beside ``servecert load run``.

Data flow of one run::

    the fake model's folder (``servecert.fakes.model_folder``, ``servecert-bytes-v1``)  -> AIPerf's --tokenizer
    2 fake engines serving the same tokenizer (ground truth to one file) + the reference frontend (file discovery)
    AIPerf against the frontend, then against one engine directly (completions, streaming)
        -> per request: AIPerf's own token counts (it tokenizes prompt and output with the folder)
           beside the usage the server reported, and beside the engines' ground truth
    GuideLLM likewise, when installed (chat completions, synthetic prompts it builds with the folder's
    tokenizer) -> its per-request counts beside the ground truth, and whether the engine counted
    each prompt as GuideLLM built it
    ``servecert load run constant`` against the frontend (the suite's own locust client)
    -> one table: TTFT and ITL p50/p99 and output tokens per request, by client and target;
       the share of prompt tokens the engines served from their prefix cache (ground truth);
       and how many requests' token counts disagree (the contract is: none)

Why: AIPerf once counted every completion of the fake engine as 8 tokens instead of 25-32
(no tokenizer it could load). With the model folder its counts equal the engine's on every
request; this bench shows it on each run, and the two clients' latencies side by side (figures,
never a verdict). The completions endpoint is used because a chat prompt's role markers are
tokens the engine counts and AIPerf's input length does not. The engines serve
``servecert-bytes-v1``: both clients build prompts by decoding their corpus's token ids, and under
words-v1's folder those were ``unk unk ...``, nearly all served from the prefix cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from servecert.benchmarks import processes
from servecert.fakes import groundtruth, model_folder
from servecert.protocol import tokenizer

AIPERF_INSTALL = "install AIPerf in a venv of its own: python3 -m venv ~/aiperf && ~/aiperf/bin/pip install aiperf==0.13.0"
GUIDELLM_INSTALL = (
    "install GuideLLM in a venv of its own (it pulls torch, about 6 GB): python3 -m venv ~/guidellm && "
    "~/guidellm/bin/pip install guidellm==0.8.1"
)
GUIDELLM_PROMPT_TOKENS = 64
CHAT_MARKERS = 2
"""GuideLLM sends chat completions: the engine counts its ``<|user|>`` and ``<|assistant|>`` markers as prompt tokens too."""
MODEL = "bench"
TOKENIZER = tokenizer.BYTES_NAME
AIPERF_TIMEOUT_S = 600.0
LOAD_TIMEOUT_S = 600.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=200, help="requests per AIPerf run")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--output-tokens", type=int, default=32, help="mean output tokens AIPerf asks for (stddev a quarter of it)")
    p.add_argument("--load-seconds", type=float, default=20.0, help="duration of the servecert load run")
    p.add_argument("--aiperf", type=Path, help="the aiperf executable (default: aiperf on PATH)")
    p.add_argument("--guidellm", type=Path, help="the guidellm executable (default: guidellm on PATH; without one, GuideLLM is left out)")
    p.add_argument(
        "--tokenizer",
        choices=sorted(tokenizer.KNOWN),
        default=TOKENIZER,
        help="the engines' and the folder's tokenizer (words-v1 shows its folder's prompts cached: unk unk ...)",
    )
    p.add_argument("--json", type=Path)


def _say(message: str) -> None:
    print(f"[bench clients] {message}", file=sys.stderr, flush=True)


def aiperf_executable(given: Path | None) -> str:
    found = str(given) if given is not None else shutil.which("aiperf")
    if not found or not Path(found).is_file():
        raise RuntimeError(f"AIPerf not found ({given or 'aiperf on PATH'}): {AIPERF_INSTALL}, then pass --aiperf ~/aiperf/bin/aiperf")
    return found


def run_aiperf(exe: str, url: str, folder: Path, out: Path, args: argparse.Namespace) -> None:
    cmd = [exe, "profile", "--model", MODEL, "--url", url, "--endpoint-type", "completions", "--streaming",
           "--tokenizer", str(folder), "--concurrency", str(args.concurrency), "--request-count", str(args.requests),
           "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", str(max(1, args.output_tokens // 4)),
           "--output-artifact-dir", str(out), "--no-auto-plot"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=AIPERF_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"aiperf exited with {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")


def _value(record: dict[str, Any], key: str) -> Any:
    found = record["metrics"].get(key)
    return None if found is None else found["value"]


def aiperf_figures(out: Path, truth: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency percentiles from AIPerf's summary; token agreement per request from its records, usage and ground truth."""
    summary = json.loads((out / "profile_export_aiperf.json").read_text())
    records = [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines() if line.strip()]
    ok = [r for r in records if not r.get("error")]
    client_out = [_value(r, "output_token_count") for r in ok]
    client_in = [_value(r, "input_sequence_length") for r in ok]
    served = [t for t in truth if t.get("outcome") == groundtruth.OK]
    return {
        "requests": len(records),
        "errors": len(records) - len(ok),
        "ttft_ms": {p: summary["time_to_first_token"][p] for p in ("p50", "p99")},
        "itl_ms": {p: summary["inter_token_latency"][p] for p in ("p50", "p99")},
        "output_tokens_mean": summary["output_sequence_length"]["avg"],
        "output_vs_usage_mismatches": sum(1 for r in ok if _value(r, "output_token_count") != _value(r, "usage_completion_tokens")),
        "input_vs_usage_mismatches": sum(1 for r in ok if _value(r, "input_sequence_length") != _value(r, "usage_prompt_tokens")),
        "output_equals_ground_truth": Counter(client_out) == Counter(t["completion_tokens"] for t in served),
        "input_equals_ground_truth": Counter(client_in) == Counter(t["prompt_tokens"] for t in served),
        "ground_truth_requests": len(served),
        "prompt_cached_share": cached_share(served),
    }


def guidellm_executable(given: Path | None) -> str | None:
    """GuideLLM's executable, or None (said on stderr) when there is none: it is optional, AIPerf is not."""
    found = str(given) if given is not None else shutil.which("guidellm")
    if found and Path(found).is_file():
        return found
    _say(f"GuideLLM left out: not found ({given or 'guidellm on PATH'}); {GUIDELLM_INSTALL}, then pass --guidellm ~/guidellm/bin/guidellm")
    return None


def run_guidellm(exe: str, url: str, folder: Path, out: Path, args: argparse.Namespace, seed: int) -> None:
    """GuideLLM's synthetic run; ``seed`` picks its prompts (its default, 42, sends the same text every run: cached)."""
    cmd = [exe, "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
           "--profile", f"kind=concurrent,streams={args.concurrency}", "--constraint", f"kind=max_requests,count={args.requests}",
           "--tokenizer", f"kind=huggingface_auto,model={folder}",
           "--data", f"kind=synthetic_text,prompt_tokens={GUIDELLM_PROMPT_TOKENS},output_tokens={args.output_tokens}",
           "--seed", f"kind=static,value={seed}",
           "--output", f"kind=json,path={out}", "--disable-console-interactive"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=AIPERF_TIMEOUT_S, check=False)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"guidellm exited with {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")


def guidellm_figures(out: Path, truth: list[dict[str, Any]]) -> dict[str, Any]:
    """GuideLLM's latencies and per-request token counts (from usage) beside the ground truth; its prompts as it built them.

    GuideLLM builds each synthetic prompt as ``GUIDELLM_PROMPT_TOKENS`` tokens of the model folder's tokenizer: the engine
    must count exactly that many, plus the chat markers.
    """
    bench = json.loads(out.read_text())["benchmarks"][0]
    requests = bench["requests"]
    ok = requests["successful"]
    failed = len(requests["errored"]) + len(requests["incomplete"])
    metrics = bench["metrics"]
    served = [t for t in truth if t.get("outcome") == groundtruth.OK]
    client_in = [r["input_metrics"]["text_tokens"] for r in ok]
    client_out = [r["output_metrics"]["text_tokens"] for r in ok]
    return {
        "requests": len(ok) + failed,
        "errors": failed,
        "ttft_ms": {p: metrics["time_to_first_token_ms"]["successful"]["percentiles"][p] for p in ("p50", "p99")},
        "itl_ms": {p: metrics["inter_token_latency_ms"]["successful"]["percentiles"][p] for p in ("p50", "p99")},
        "output_tokens_mean": metrics["output_token_count"]["successful"]["mean"],
        "prompts_not_as_built": sum(1 for t in served if t["prompt_tokens"] != GUIDELLM_PROMPT_TOKENS + CHAT_MARKERS),
        "output_equals_ground_truth": Counter(client_out) == Counter(t["completion_tokens"] for t in served),
        "input_equals_ground_truth": Counter(client_in) == Counter(t["prompt_tokens"] for t in served),
        "ground_truth_requests": len(served),
        "prompt_cached_share": cached_share(served),
    }


def load_figures(url: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "servecert", "load", "run", "constant", "--host", url, "--model", MODEL,
           "--users", str(args.concurrency), "--duration", f"{args.load_seconds:g}", "--no-limits", "--report-dir", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"servecert load run exited with {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "requests": summary["requests"],
        "errors": summary.get("failed", 0),
        "ttft_ms": {p: summary["ttft_ms"].get(p) for p in ("p50", "p99")},
        "itl_ms": {p: summary["itl_ms"].get(p) for p in ("p50", "p99")},
        "output_tokens_mean": summary["output_tokens"].get("mean"),
    }


def cached_share(served: list[dict[str, Any]]) -> float:
    """The share of the served prompts' tokens the engines took from their prefix cache (ground truth)."""
    prompt = sum(int(t["prompt_tokens"]) for t in served)
    return sum(int(t["cached_tokens"]) for t in served) / prompt if prompt else 0.0


class TruthCursor:
    """The ground-truth records the engines appended since the last ``take``."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, 0

    def take(self) -> list[dict[str, Any]]:
        records = groundtruth.read_json_lines(self.path) if self.path.is_file() else []
        new, self.seen = records[self.seen :], len(records)
        return new


def measure(args: argparse.Namespace) -> dict[str, Any]:
    exe = aiperf_executable(args.aiperf)
    guidellm = guidellm_executable(getattr(args, "guidellm", None))
    cli = [sys.executable, "-m", "servecert"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="servecert-bench-clients-") as tmp:
        root = Path(tmp)
        folder = root / "model"
        name = getattr(args, "tokenizer", TOKENIZER)
        model_folder.write(folder, tokenizer_name=name)
        truth = TruthCursor(root / "groundtruth.jsonl")
        engines, engine_urls = processes.start([*cli, "engine", "serve", "--model", MODEL, "--port", "0", "--count", "2",
                                                "--host", "127.0.6.1", "--discovery-dir", str(root / "discovery"),
                                                "--groundtruth-file", str(truth.path), "--tokenizer", name])  # fmt: skip
        try:
            frontend_cmd = [*cli, "frontend", "serve", "--port", "0", "--discovery-dir", str(root / "discovery")]
            frontend, (frontend_url, *_) = processes.start(frontend_cmd)
            try:
                asyncio.run(processes.wait_routable(frontend_url, 2))
                for seed, (name, url) in enumerate((("frontend", frontend_url), ("engine", engine_urls[0])), start=1):
                    _say(f"AIPerf against the {name} ({url}): {args.requests} requests at concurrency {args.concurrency} ...")
                    truth.take()
                    run_aiperf(exe, url, folder, root / f"aiperf-{name}", args)
                    results[f"aiperf/{name}"] = aiperf_figures(root / f"aiperf-{name}", truth.take())
                    _say(f"  {results[f'aiperf/{name}']}")
                    if guidellm is not None:
                        _say(f"GuideLLM against the {name} ({url}): {args.requests} requests at concurrency {args.concurrency} ...")
                        truth.take()
                        run_guidellm(guidellm, url, folder, root / f"guidellm-{name}.json", args, seed)
                        results[f"guidellm/{name}"] = guidellm_figures(root / f"guidellm-{name}.json", truth.take())
                        _say(f"  {results[f'guidellm/{name}']}")
                _say(f"servecert load run constant against the frontend, {args.load_seconds:g}s ...")
                results["load-run/frontend"] = load_figures(frontend_url, root / "load", args)
                _say(f"  {results['load-run/frontend']}")
            finally:
                processes.stop(frontend)
        finally:
            processes.stop(engines)
    return results


def table(results: dict[str, Any]) -> str:
    columns = ("requests", "errors", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "out tok")
    widths = (8, 6, 9, 9, 8, 8, 8)
    head = f"{'client/target':22} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)) + "  cached  tokens"
    lines = [head, "-" * len(head)]
    for name, fig in results.items():
        agree = _agreement(fig)
        lines.append(
            f"{name:22} {fig['requests']:>8} {fig['errors']:>6} {fig['ttft_ms']['p50']:>7.1f}ms {fig['ttft_ms']['p99']:>7.1f}ms "
            f"{fig['itl_ms']['p50']:>6.2f}ms {fig['itl_ms']['p99']:>6.2f}ms {fig['output_tokens_mean']:>8.1f}  {_cached(fig):>6}  {agree}"
        )
    return "\n".join(lines)


def _cached(fig: dict[str, Any]) -> str:
    share = fig.get("prompt_cached_share")
    return "-" if share is None else f"{100 * share:.1f}%"


def _agreement(fig: dict[str, Any]) -> str:
    if "output_equals_ground_truth" not in fig:
        return "(the suite's own counts)"
    truth = f"ground truth {'equal' if fig['output_equals_ground_truth'] and fig['input_equals_ground_truth'] else 'DIFFERS'}"
    if "prompts_not_as_built" in fig:
        return f"{fig['prompts_not_as_built']} prompts not counted as built; {truth}"
    return f"{fig['output_vs_usage_mismatches']} out / {fig['input_vs_usage_mismatches']} in differ from usage; {truth}"


def run(args: argparse.Namespace) -> int:
    try:
        results = measure(args)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"servecert bench clients: error: {exc}", file=sys.stderr)
        return 2
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0
