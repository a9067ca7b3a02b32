"""The ``servecert`` command: the one package above everything (suite, benchmarks, reference).

It only parses arguments and hands each subcommand to its package: ``certify`` to the suite,
``bench`` to ``benchmarks``, ``operator``/``frontend``/``proxy`` to the reference implementation,
``engine`` to the fakes. Nothing imports it, so the suite stays free of benchmarks and of any
implementation.
"""
