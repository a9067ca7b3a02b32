"""The conformance suite: features and profiles, tests, the runner, the report, and the CLI."""
