"""Fake GPU engines and the fake network between them: the suite's source of ground truth."""
