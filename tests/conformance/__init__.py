"""Tests of conformance/: the suite framework, and the profiles' own helpers."""
