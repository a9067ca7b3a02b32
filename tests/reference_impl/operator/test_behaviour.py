"""The reference operator's replaceable ``Behaviour``: loading one by name, and the reference's."""

from __future__ import annotations

import pytest

from servecert.reference_impl.operator import behaviour as behaviour_mod
from servecert.reference_impl.operator.behaviour import REFERENCE


def test_load_returns_the_named_behaviour() -> None:
    assert behaviour_mod.load("servecert.reference_impl.operator.behaviour:REFERENCE") is REFERENCE


def test_reference_behaviour_uses_the_seed_task_key_and_the_bound_node() -> None:
    assert REFERENCE.task_key("decode", 1) == "decode-1"
    assert REFERENCE.label_node("node-b", ["node-a", "node-b", "node-c"]) == "node-b"
    assert (REFERENCE.inject_before_binding, REFERENCE.check_level) == (False, True)


@pytest.mark.parametrize(
    "spec",
    [
        "servecert.reference_impl.operator.behaviour",
        ":REFERENCE",
        "servecert.reference_impl.operator.behaviour:",
        "",
        "servecert.reference_impl.operator.behaviour.REFERENCE",
    ],
)
def test_load_refuses_a_malformed_spec(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        behaviour_mod.load(spec)
    assert str(info.value) == f"--behaviour {spec!r} must look like package.module:ATTRIBUTE"


@pytest.mark.parametrize(
    "spec", ["servecert.reference_impl.operator.behaviour:seed_task_key", "servecert.reference_impl.operator.behaviour:NO_SUCH_ATTRIBUTE"]
)
def test_load_refuses_an_attribute_that_is_not_a_behaviour(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        behaviour_mod.load(spec)
    assert str(info.value) == f"--behaviour {spec!r} is not a servecert.reference_impl.operator.behaviour.Behaviour"
