"""Contracts spoken by both sides of the suite (the fakes and the reference implementation), and the one wait primitive.

Nothing here does I/O. The fake engines (``fakes``) and the reference frontend, router,
planner and operator (``reference_impl``) both import these types; neither imports the other.
``waiting`` lives here because every layer above (fakes, reference, fixtures, suite,
benchmarks, tests) may import ``protocol``.
"""
