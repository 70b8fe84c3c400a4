"""Alibaba Cloud endpoint settings (``ros-endpoint``, the selector's ``*-endpoint``) as the cloud SDKs take them.

A setting may be empty (the SDK's regional endpoint), a bare host (https), or a URL whose scheme
says the protocol (``http://127.0.0.1:8080`` for a local stand-in). Every plugin that builds an
Alibaba Cloud SDK client reads its endpoint setting through :func:`split_endpoint`.
"""

from __future__ import annotations


def split_endpoint(endpoint: str) -> tuple[str | None, str]:
    """The host (``None``: the SDK's regional endpoint) and the protocol of an endpoint setting
    (``http://host:port`` speaks http; a bare host or ``https://`` speaks https)."""
    endpoint = endpoint.strip()
    if not endpoint:
        return None, "https"
    for scheme in ("http://", "https://"):
        if endpoint.lower().startswith(scheme):
            return endpoint[len(scheme):].rstrip("/") or None, scheme[:-3]
    return endpoint.rstrip("/"), "https"
