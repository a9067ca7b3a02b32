"""Seed 001 4.3.3: the DGD's stable address is a weighted proxy (HAProxy) in front of the old and new frontends."""
