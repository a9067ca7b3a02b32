"""Judging a load run: limits on the summary's figures, and which of them the run missed.

A load run measures (``metrics.summarise`` -> ``summary.json``); a ``Limit`` says what it must
measure to pass: a figure of the summary by its dotted path (``ttft_ms.p95``, ``tpot_ms.p99``,
``itl_ms.p50``, ``error_rate``, ``goodput.fraction``, ``request_throughput`` ...), ``<=`` or ``>=``,
and a bound, written ``ttft_ms.p95<=1000``. A profile carries its limits; ``--limit`` on the
command line replaces the profile's limit on the same figure and adds the others. ``judge``
returns one sentence per missed limit, naming the limit and the measured value, so the runner's
exit status and message come from the measured figures alone. A figure the run did not measure
(no successful request, so no TTFT at all) is missed, not passed: a run that served nothing must
not pass a latency limit.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servecert.load.metrics import Sample, Thresholds, summarise

_SYNTAX = re.compile(r"^\s*([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")


class LimitSyntaxError(ValueError):
    """A limit that does not read FIGURE<=BOUND or FIGURE>=BOUND; the message shows the form."""


@dataclass(frozen=True)
class Limit:
    figure: str  # dotted path into summary.json
    op: str  # "<=" or ">="
    bound: float

    @classmethod
    def parse(cls, text: str) -> Limit:
        m = _SYNTAX.match(text)
        if m is None:
            raise LimitSyntaxError(
                f"cannot read limit {text!r}: write FIGURE<=BOUND or FIGURE>=BOUND with a figure of summary.json, "
                "e.g. ttft_ms.p95<=1000, tpot_ms.p99<=100, error_rate<=0, goodput.fraction>=0.95"
            )
        try:
            bound = float(m.group(3))
        except ValueError:
            raise LimitSyntaxError(f"cannot read the bound of limit {text!r}: {m.group(3)!r} is not a number") from None
        return cls(m.group(1), m.group(2), bound)

    def __str__(self) -> str:
        return f"{self.figure}{self.op}{self.bound:g}"

    def missed(self, summary: Mapping[str, Any]) -> str | None:
        """Why ``summary`` misses this limit, or None when it meets it."""
        value = measured(summary, self.figure)
        if value is None:
            return f"{self}: not measured (the run has no {self.figure}: {summary.get('succeeded', 0)} requests succeeded)"
        ok = value <= self.bound if self.op == "<=" else value >= self.bound
        return None if ok else f"{self}: measured {value:.4g}"


def measured(summary: Mapping[str, Any], figure: str) -> float | None:
    node: Any = summary
    for key in figure.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


def merged(profile_limits: Iterable[str], overrides: Iterable[str]) -> list[Limit]:
    """The profile's limits, each replaced by an override on the same figure, then the other overrides.

    Raises LimitSyntaxError for a figure no summary has, before the run rather than after it.
    """
    by_figure = {limit.figure: limit for limit in map(Limit.parse, profile_limits)}
    for limit in map(Limit.parse, overrides):
        by_figure[limit.figure] = limit
    for limit in by_figure.values():
        _must_be_a_figure(limit)
    return list(by_figure.values())


def figures() -> list[str]:
    """Every figure a summary can have (``errors.KIND`` for each error kind): the leaves of a summary of two samples."""
    ok = Sample(start=0.0, ok=True, error="", ttft_ms=1.0, tpot_ms=1.0, e2e_ms=2.0, output_tokens=2, input_tokens=1, itl_ms=(1.0,))
    failed = Sample(start=0.0, ok=False, error="http_503", ttft_ms=None, tpot_ms=None, e2e_ms=1.0, output_tokens=0)
    return sorted(_leaves(summarise([ok, failed], Thresholds(ttft_ms=1.0, itl_ms=1.0))))


def _leaves(node: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in node.items():
        path = prefix + key
        if isinstance(value, Mapping):
            out.extend(_leaves(value, path + "."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out.append(path)
    return out


def _must_be_a_figure(limit: Limit) -> None:
    known = figures()
    if limit.figure in known or limit.figure.startswith("errors."):
        return
    close = difflib.get_close_matches(limit.figure, known, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise LimitSyntaxError(f"limit {limit}: summary.json has no figure {limit.figure}; {hint}its figures: {', '.join(known)}")


def judge(summary: Mapping[str, Any], limits: Sequence[Limit]) -> list[str]:
    """One sentence per limit the run missed; empty when it met them all."""
    return [reason for reason in (limit.missed(summary) for limit in limits) if reason is not None]
