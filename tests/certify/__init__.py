"""`servecert certify` run as a vendor runs it: the reference passes each profile, and each broken
implementation in tests/nonconforming/ is failed by the test of the rule it breaks."""
