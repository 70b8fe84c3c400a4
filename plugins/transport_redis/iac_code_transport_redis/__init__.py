"""Redis Streams JSON-RPC transport."""
