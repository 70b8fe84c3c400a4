"""OpenTelemetry distributed tracing for the iac-code A2A server."""
