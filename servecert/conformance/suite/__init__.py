"""The suite framework: what a conformance test is, which ones run, and how one case runs.

Data flow: ``collect`` imports every module under the tests package and returns their
``TEST`` declarations (``test_case.ConformanceTest``). ``options`` turns command-line values
into ``Settings`` (the implementation, the profiles, the feature set, the timeouts). ``runner``
keeps the tests of the requested profiles, gives each (test, case) a verdict before it runs —
the only place in the suite that decides to skip — and runs a case in a fresh environment with
its cleanups. ``reporting`` turns the per-case results into the plain data the report writers in
``servecert/reports/`` take. ``servecert.conformance.plugin`` is the pytest face of all this, ``servecert.conformance.certify``
the command-line one.
"""
