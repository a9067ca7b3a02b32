"""Helpers shared by more than one profile's tests: Kubernetes reads and waits (``kube``) and the
suite's own manifests (``manifests``). Profile-specific helpers live beside their tests, in
``servecert/conformance/tests/<profile>/_*.py``.
"""
