"""Prometheus metrics for the iac-code A2A server."""
