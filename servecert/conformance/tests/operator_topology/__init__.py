"""OPERATOR-TOPOLOGY: what an operator does with kvCacheTransferTopology (seed 000)."""
