"""The reference operator: DGD and InferenceService reconciliation, admission, topology injection."""
