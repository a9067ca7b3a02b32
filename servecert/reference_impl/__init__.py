"""The reference implementation: operator, frontend with KV router, planner, traffic splitter."""
