"""security: see docs/architecture.md for what this layer holds."""
