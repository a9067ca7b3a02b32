"""Assertion helpers of the conformance tests, named ``<object>_must_<condition>``.

Each fails with a message naming the object and what was seen, so a vendor reading the report
knows what broke without the suite's source. Helpers that wait poll up to a deadline from the
``Timeouts`` object; none sleeps a fixed time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from servecert.adapters.contract import Deployment, LoggingDeployment, LogRecord
from servecert.harness.observe import Transfer
from servecert.harness.traffic import Outcome
from servecert.protocol import waiting


def _sample(outcomes: Sequence[Outcome], limit: int = 3) -> str:
    return "; ".join(f"status={o.status} error={o.error}" for o in outcomes[:limit])


def requests_must_succeed(outcomes: Sequence[Outcome], what: str) -> None:
    failed = [o for o in outcomes if not o.ok]
    assert not failed, f"{what}: {len(failed)} of {len(outcomes)} requests failed, e.g. {_sample(failed)}"


def requests_must_fail(outcomes: Sequence[Outcome], what: str) -> None:
    served = [o for o in outcomes if o.ok]
    assert not served, f"{what}: {len(served)} of {len(outcomes)} requests were served although they must fail"


def transfers_must_stay_within(transfers: Sequence[Transfer], level: str, what: str) -> None:
    crossing = [t for t in transfers if t.crosses(level)]
    assert not crossing, (
        f"{what}: {len(crossing)} of {len(transfers)} KV transfers crossed the {level} boundary, e.g. "
        + "; ".join(f"{t.source}({t.source_domains.get(level)}) -> {t.dest}({t.dest_domains.get(level)})" for t in crossing[:3])
    )


def transfers_must_exist(transfers: Sequence[Transfer], expected: int, what: str) -> None:
    assert len(transfers) >= expected, f"{what}: expected at least {expected} KV transfers in the engines' log, found {len(transfers)}"


def transfers_must_not_exist(transfers: Sequence[Transfer], what: str) -> None:
    assert not transfers, f"{what}: expected no KV transfer, the engines recorded {len(transfers)}, e.g. {transfers[0]}"


def destinations_must_be(transfers: Sequence[Transfer], allowed: set[str], what: str) -> None:
    wrong = sorted({t.dest for t in transfers} - allowed)
    assert not wrong, f"{what}: KV was transferred to {wrong}; only {sorted(allowed)} may receive it"


async def condition_must_hold_eventually(
    probe: Callable[[], Awaitable[bool]], timeout_s: float, poll_s: float, what: str, consecutive: int = 1
) -> None:
    """Poll ``probe`` until it is true ``consecutive`` times in a row, within ``timeout_s`` (else ``WaitTimeout``, an AssertionError)."""
    await waiting.until_async(probe, timeout_s=timeout_s, what=what, interval_s=poll_s, consecutive=consecutive)


async def log_of(deployment: Deployment) -> list[LogRecord]:
    """The implementation's own log records; fails, naming the contract, when the adapter offers none."""
    if not isinstance(deployment, LoggingDeployment):
        raise AssertionError(
            f"{type(deployment).__name__} gives the suite no way to read the implementation's log, so seed 000's "
            "'Log warning' cannot be checked: implement log_records() (servecert.adapters.contract.LoggingDeployment, docs/router.md)"
        )
    return await deployment.log_records()


def log_must_warn_of(records: Sequence[LogRecord], level: str, what: str) -> None:
    warnings = [r for r in records if r.level in ("WARNING", "ERROR", "CRITICAL")]
    naming = [r for r in warnings if level in r.message]
    assert naming, (
        f"{what}: no warning naming the level {level!r} in the implementation's log "
        f"({len(records)} records, {len(warnings)} at WARNING or above"
        + (f", e.g. {warnings[0].message!r}" if warnings else "")
        + ")"
    )
