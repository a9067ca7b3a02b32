"""ROUTER-TOPOLOGY: topology-aware KV-transfer routing between prefill and decode workers (seed 000)."""
