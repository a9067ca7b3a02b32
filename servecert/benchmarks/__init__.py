"""Benchmarks: figures measured on the machine at hand, never pass/fail assertions."""
