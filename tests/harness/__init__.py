"""Tests of servecert/harness/: the harness pieces the suite drives implementations through."""
