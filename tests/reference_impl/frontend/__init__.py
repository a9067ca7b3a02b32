"""Tests of servecert/reference_impl/frontend/: the reference frontend, its router, discovery and drain."""
