"""servecert: a conformance suite for Kubernetes control planes that serve LLMs with disaggregated prefill and decode.

One top-level package; its parts, top to bottom, as the ``layers`` import contract in
``pyproject.toml`` enforces them (a part imports only parts below it)::

    cli, __main__, traceability     the ``servecert`` command; hands each subcommand to its package
    benchmarks                      figures, never verdicts; reaches the suite's scenarios only
                                    through ``conformance.scenarios``
    conformance | adapters.<name>   the suite (tests as data, the runner, the pytest plugin) beside the
                                    in-tree adapters (reference, dynamo, pd_routers); neither imports the other
    harness                         environments (process, embedded cluster), the cluster builder,
                                    ground-truth instruments, the planner scenario kit
    adapters.contract               the vendor contract: what an implementation's adapter provides and
                                    may call; the one module a vendor imports
    reference_impl | fakes          the reference operator, router and planner; the fake GPU engines
    features | load | reports | protocol
                                    feature names, locust profiles, report writers, wire formats and
                                    the one wait primitive

Importing ``servecert`` imports none of them: each is loaded when used, so a pod's program pays only
for what it runs.
"""
