"""Tests of servecert/conformance/: the suite framework, and the profiles' own helpers."""
