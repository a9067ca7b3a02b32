"""Tests of the helpers of conformance/tests/rollout_isolation/ (its rule verdict)."""
