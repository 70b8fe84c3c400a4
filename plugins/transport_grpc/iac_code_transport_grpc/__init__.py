"""The official A2A gRPC transport (``transport: grpc``) for the iac-code A2A server."""
