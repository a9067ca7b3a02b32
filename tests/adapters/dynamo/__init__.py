"""Tests of servecert/adapters/dynamo/: the NVIDIA Dynamo adapter."""
