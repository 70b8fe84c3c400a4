"""HTTP JSON-RPC + SSE transport for the iac-code A2A server, on aiohttp."""
