"""ROLLOUT-ISOLATION: seed 001 rollouts under streaming load, judged from the fakes' ground truth."""
