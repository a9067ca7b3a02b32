"""PLANNER-SCALING: an autoscaling planner holds the TTFT and ITL SLAs within its limits (seed 003).

Process environment: the planner runs on the Virtual connector and the suite's harness is the
external system that adds workers (each loading its model for ``planner_engine_startup_s``)
and removes them; every verdict reads the harness's and the engines' ground truth.
"""
