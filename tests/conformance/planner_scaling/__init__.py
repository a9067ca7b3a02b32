"""Tests of the helpers of servecert/conformance/tests/planner_scaling/ (its run checks)."""
