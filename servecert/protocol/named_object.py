"""``package.module:ATTRIBUTE`` on a command line: the object it names, of the type the flag takes.

The reference's programs take their deliberately broken variants this way (the operator's
``--behaviour``, the planner pod's ``--hooks``), so a conformance run can start the same program
with one choice changed; a wrong spelling or a wrong type is a ValueError naming the flag.
"""

from __future__ import annotations

import importlib
from typing import TypeVar

T = TypeVar("T")


def load(spec: str, flag: str, kind: type[T]) -> T:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{flag} {spec!r} must look like package.module:ATTRIBUTE")
    found = getattr(importlib.import_module(module_name), attr, None)
    if not isinstance(found, kind):
        raise ValueError(f"{flag} {spec!r} is not a {kind.__module__}.{kind.__qualname__}")
    return found
