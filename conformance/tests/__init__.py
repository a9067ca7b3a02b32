"""The conformance tests: one test per module, each defining ``TEST = ConformanceTest(...)``.

One sub-package per profile (``router_topology`` for ROUTER-TOPOLOGY). Helper modules shared by
tests start with an underscore. See docs/suite.md for how to write one.
"""
