"""The NDJSON stream transports of the iac-code A2A server, server and client sides.

``stdio`` (newline-delimited JSON-RPC frames on stdin/stdout, one server process per client) and
``unix`` (the same framing on a Unix domain socket, one session per connection) share one
session (:mod:`iac_code_transport_stdio.ndjson`) and one client
(:mod:`iac_code_transport_stdio.ndjson_client`).
"""
