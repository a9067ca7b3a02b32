"""Tests of servecert/reference_impl/planner/: its scaling rules, models and connectors."""
