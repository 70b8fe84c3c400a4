"""MCP (Model Context Protocol) tool servers for the iac-code agent runtimes (see docs/mcp.md)."""
