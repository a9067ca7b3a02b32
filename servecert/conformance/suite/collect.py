"""Find the conformance tests: import every module of the tests package, take each one's ``TEST``.

One test per module (STYLE habit 4), so the module is the unit: every non-package module under
the tests package must define ``TEST = ConformanceTest(...)`` — a forgotten or misspelt ``TEST``
would otherwise drop a test from certification without a word — except helper modules, whose
names start with an underscore. Tests come back sorted by module name, so every xdist worker
collects the same list in the same order. Errors (an import failure, a missing ``TEST``, an
unknown feature, a short name used twice) raise ``CollectionError`` naming the module.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback
from dataclasses import replace

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest

DEFAULT_PACKAGE = "servecert.conformance.tests"


class CollectionError(Exception):
    """The tests package cannot be turned into a list of tests; the message names the module."""


def _import(name: str) -> object:
    try:
        return importlib.import_module(name)
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(exc)).strip()
        raise CollectionError(f"cannot import conformance test module {name}: {detail}") from exc


def module_names(package: str) -> list[str]:
    """Every non-package module under ``package``, helpers (``_name``) excluded, sorted."""
    pkg = _import(package)
    path = getattr(pkg, "__path__", None)
    if path is None:
        raise CollectionError(f"{package} is a module, not a package of conformance tests")
    names = []
    for info in pkgutil.walk_packages(path, prefix=f"{package}.", onerror=_import):
        leaf = info.name.rsplit(".", 1)[-1]
        if not info.ispkg and not leaf.startswith("_"):
            names.append(info.name)
    return sorted(names)


def collect(package: str = DEFAULT_PACKAGE) -> list[ConformanceTest]:
    """The ``TEST`` of every module under ``package``, checked, with ``source`` set to the module name."""
    tests: list[ConformanceTest] = []
    seen: dict[str, str] = {}
    for name in module_names(package):
        test = getattr(_import(name), "TEST", None)
        if test is None:
            raise CollectionError(f"{name} defines no TEST (one conformance test per module; name helper modules _like_this)")
        if not isinstance(test, ConformanceTest):
            raise CollectionError(f"{name}.TEST is a {type(test).__name__}, not a ConformanceTest")
        try:
            features.check_known(test.features, what=f"{name}: {test.short_name}")
        except features.UnknownFeatureError as exc:
            raise CollectionError(str(exc)) from None
        if test.short_name in seen:
            raise CollectionError(f"short name {test.short_name} is declared twice: in {seen[test.short_name]} and in {name}")
        seen[test.short_name] = name
        tests.append(replace(test, source=name))
    return tests
