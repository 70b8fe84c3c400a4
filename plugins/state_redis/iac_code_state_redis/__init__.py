"""Shared state on Redis for several iac-code A2A server nodes (``task-store: redis``)."""
