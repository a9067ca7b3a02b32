"""Self-tests of the suite framework: verdicts, collection, the plugin, the report, certify."""
