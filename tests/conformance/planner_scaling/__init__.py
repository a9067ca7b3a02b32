"""Tests of the helpers of conformance/tests/planner_scaling/ (its run checks)."""
