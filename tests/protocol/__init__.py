"""Tests of protocol/: the contracts and primitives both sides of the suite share."""
