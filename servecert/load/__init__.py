"""Load generation: shapes as data, OpenAI streaming users for locust, exact metrics, reports.

Nothing in this package imports locust except ``servecert/load/locustfiles/``, which only ever runs inside
a locust subprocess (``runner``): locust patches the process with gevent on import. The shapes,
prompts, SSE timing and metrics are plain Python, shared by the locustfiles and by the suite's
in-process generator (``servecert/harness/load_generator.py``).
"""
