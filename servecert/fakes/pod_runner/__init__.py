"""The pod runner: brings pods on kwok's fake nodes to life as local processes (see runner.py)."""
