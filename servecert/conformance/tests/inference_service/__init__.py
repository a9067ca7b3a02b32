"""INFERENCESERVICE-API: what an operator makes of an InferenceService (seed 004)."""
