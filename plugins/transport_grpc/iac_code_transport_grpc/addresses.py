"""Which bind addresses may serve gRPC without TLS, and the start-up error when one may not."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``)."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_refused(host: str) -> str:
    """The start-up error for plaintext gRPC on a non-loopback ``host`` without ``grpc-insecure``."""
    return (f"gRPC would serve plaintext on the non-loopback address {host!r}: set 'grpc-tls-cert' and "
            "'grpc-tls-key', or 'grpc-insecure: true' to allow it.")
