"""Tests of servecert/: the command above everything (its generated docs)."""
