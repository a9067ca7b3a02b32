"""Tests of servecert/reference_impl/operator/: its pure modules without a cluster, and the operator on the shared cluster."""
