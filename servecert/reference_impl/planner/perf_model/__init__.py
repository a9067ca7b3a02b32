"""Perf models: how long an engine iteration takes for a given load, per component.

``protocol.PerfModel`` is the interface; ``regression`` fits it online to the engines'
forward-pass metrics (Dynamo's PrefillRegressionModel / DecodeRegressionModel, 1-D least squares
in numpy), ``table`` interpolates a pre-deployment profile (the fake engines' timing-table
format: prefill ISL -> ms, decode active KV tokens -> ms).
"""
