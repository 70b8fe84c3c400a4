"""The HTTP (JSON-RPC, HTTP+JSON, SSE) and WebSocket transports for the iac-code A2A server, on aiohttp."""
