"""Tests of the helpers of servecert/conformance/tests/rollout_isolation/ (its rule verdict)."""
