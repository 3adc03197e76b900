"""Experiment designs built on evaluations: A/B comparisons and latency sweeps."""
