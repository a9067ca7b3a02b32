"""The reference frontend: OpenAI API, preprocessing with the worker set's model card, KV-aware routing."""
