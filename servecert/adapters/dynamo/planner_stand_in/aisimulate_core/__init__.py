"""A stand-in for NVIDIA's ``aisimulate_core``, whose wheel comes only from NVIDIA's index.

Dynamo 1.6.1's planner imports two names from it (``_native``, ``sdk``); ``sdk`` gives them over
aiconfigurator-core's forward-pass model (PyPI). Only the planner's interpreter sees this folder
(``PYTHONPATH``, set by ``servecert/adapters/dynamo/planner.py``); the suite never imports it.
"""
