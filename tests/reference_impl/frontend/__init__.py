"""Tests of reference_impl/frontend/: the reference frontend, its router, discovery and drain."""
