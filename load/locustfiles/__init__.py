"""locustfiles: run only inside a locust subprocess (``load.runner``); never import them elsewhere."""
