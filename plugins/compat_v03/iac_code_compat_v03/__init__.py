"""A2A 0.3 clients for the iac-code A2A server: 0.3 method names, ``/v1/...`` routes and card fields over the 1.0 core."""
