"""The vendor contract's loader: an instance, a class or a factory all give an Implementation instance."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from servecert.adapters import contract
from servecert.adapters.contract import AdapterError, Deployment, DeploymentSpec, Environment, ImplementationMetadata

MODULE = "servecert_test_vendor_adapter"


class ClassAttributes:
    """Metadata and features as class attributes: the class itself passes isinstance(..., Implementation)."""

    metadata = ImplementationMetadata("acme", "router", "https://example.invalid", "1.0")
    supported_features = frozenset({contract.features.DISAGGREGATED_SERVING})

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> Deployment:
        raise AdapterError("not deployed in this test")


def make() -> ClassAttributes:
    return ClassAttributes()


@pytest.fixture
def vendor_module() -> Iterator[types.ModuleType]:
    module = types.ModuleType(MODULE)
    module.CLASS = ClassAttributes  # type: ignore[attr-defined]
    module.INSTANCE = ClassAttributes()  # type: ignore[attr-defined]
    module.factory = make  # type: ignore[attr-defined]
    module.NOT_ONE = object()  # type: ignore[attr-defined]
    sys.modules[MODULE] = module
    yield module
    del sys.modules[MODULE]


@pytest.mark.parametrize("attribute", ["CLASS", "INSTANCE", "factory"])
def test_each_spelling_loads_an_instance(vendor_module: types.ModuleType, attribute: str) -> None:
    impl = contract.load(f"{MODULE}:{attribute}")
    assert isinstance(impl, ClassAttributes), impl


def test_an_object_that_is_not_an_implementation_is_refused_naming_what_it_needs(vendor_module: types.ModuleType) -> None:
    with pytest.raises(AdapterError, match="needs metadata, supported_features and deploy"):
        contract.load(f"{MODULE}:NOT_ONE")


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(AdapterError, match=r"registered: .*reference"):
        contract.load("no-such-implementation")
