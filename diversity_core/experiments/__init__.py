"""Experiment-specific data generation and protocols used by the rule scripts."""
