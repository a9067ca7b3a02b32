"""The one module pytest collects for the conformance suite.

It holds no test of its own: the servecert plugin (``servecert.conformance.plugin``) turns this file into
one pytest item per (conformance test, case) of the requested profiles, found by importing the
tests package (``servecert.conformance.tests``, or ``--tests-package``). Run
``pytest servecert/conformance/ --implementation NAME --profile ROUTER-TOPOLOGY`` or ``servecert certify``.
"""
