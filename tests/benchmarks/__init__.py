"""Tests of the benchmarks' own pieces (figures are never asserted; their inputs are)."""
