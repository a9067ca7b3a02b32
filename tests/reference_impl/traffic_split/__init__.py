"""Tests of servecert/reference_impl/traffic_split/: the weighted HAProxy split and its weights."""
