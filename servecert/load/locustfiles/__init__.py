"""locustfiles: run only inside a locust subprocess (``servecert.load.runner``); never import them elsewhere."""
