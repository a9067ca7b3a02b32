"""Tests of reference_impl/planner/: its scaling rules, models and connectors."""
