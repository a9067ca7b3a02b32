"""Test-only conformance tests for the self-tests: one per verdict, over ROUTER-TOPOLOGY's features.

| module | short name | features | notes |
| --- | --- | --- | --- |
| deploys | SampleDeploys | DisaggregatedServing (core) | two cases |
| topology_filter | SampleTopologyFilter | KVTransferTopologyFilter (core) | |
| topology_unset | SampleTopologyUnset | KVTransferTopologyUnset (core) | |
| preferred_weight | SamplePreferredWeight | KVTransferTopologyPreferredWeight (extended) | |
| error_503 | SampleError503 | KVTransferTopologyError503 (extended) | provisional |
| latency | SampleLatency | KVTransferTopologyLatency (extended) | cluster only |
"""
