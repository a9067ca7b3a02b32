"""Tests of servecert/protocol/: the contracts and primitives both sides of the suite share."""
