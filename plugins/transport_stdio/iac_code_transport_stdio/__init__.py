"""The ``stdio`` transport for the iac-code A2A server: NDJSON JSON-RPC frames on stdin/stdout, and its client side."""
