"""Metrics and traces of what the control plane does."""
