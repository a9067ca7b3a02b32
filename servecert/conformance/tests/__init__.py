"""The conformance tests: one test per module, each defining ``TEST = ConformanceTest(...)``.

One sub-package per profile (``router_topology`` for ROUTER-TOPOLOGY). A profile's helper modules
live beside its tests and start with an underscore (``rollout_isolation/_verdict.py``); helpers
used by several profiles are in ``servecert.conformance.utils``. See docs/suite.md for how to write one.
"""
