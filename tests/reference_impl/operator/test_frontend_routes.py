"""The operator asks the new frontends again, briefly, until they have found the spec's Ready workers."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from servecert.reference_impl.operator import frontend_routes


@pytest.mark.parametrize(
    ("later", "calls", "found"),
    [
        ([{"fe": frozenset({"10.0.0.2"})}], 1, {"10.0.0.2"}),
        # NB: the second time, the frontend did not answer ({}): asked again, not taken as done
        ([{"fe": frozenset()}, {}, {"fe": frozenset({"10.0.0.2", "10.0.0.3"})}], 3, {"10.0.0.2", "10.0.0.3"}),
    ],
    ids=["found-at-once", "found-on-the-third-ask"],
)
def test_a_frontend_is_asked_again_until_it_has_found_every_wanted_worker(
    monkeypatch: pytest.MonkeyPatch, later: list[dict[str, frozenset[str]]], calls: int, found: set[str]
) -> None:
    asked: list[Mapping[str, str]] = []

    async def routed_by(frontends: Mapping[str, str], port: int) -> dict[str, frozenset[str]]:
        asked.append(frontends)
        return later[min(len(asked), len(later)) - 1]

    monkeypatch.setattr(frontend_routes, "routed_by", routed_by)
    monkeypatch.setattr(frontend_routes, "POLL_S", 0.01)
    assert frontend_routes.read({"fe": "10.0.0.9"}, 8000, frozenset({"10.0.0.2"})) == {"fe": frozenset(found)}
    assert len(asked) == calls


def test_a_frontend_that_never_finds_them_is_given_up_on_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    async def routed_by(frontends: Mapping[str, str], port: int) -> dict[str, frozenset[str]]:
        return {"fe": frozenset()}

    monkeypatch.setattr(frontend_routes, "routed_by", routed_by)
    monkeypatch.setattr(frontend_routes, "POLL_S", 0.01)
    monkeypatch.setattr(frontend_routes, "WAIT_S", 0.1)
    assert frontend_routes.read({"fe": "10.0.0.9"}, 8000, frozenset({"10.0.0.2"})) == {"fe": frozenset()}
    assert frontend_routes.read({}, 8000, frozenset({"10.0.0.2"})) == {}, "nothing to ask while no rollout runs"
