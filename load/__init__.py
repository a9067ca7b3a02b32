"""Load profiles (locust) and shapes, run as subprocesses."""
