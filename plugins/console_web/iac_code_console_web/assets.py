"""The console's static files: a fixed list read from the package data, served with strict headers.

Every asset ships inside the wheel (``static/``); nothing is fetched from elsewhere. The list is
fixed at import, so a request can name only a shipped file (no path is ever built from the URL).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

# Scripts, styles and connections only from the server itself; no inline script or style, no frames.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
       "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class Asset:
    """One shipped file: its bytes and media type."""

    body: bytes
    content_type: str


def load_assets() -> dict[str, Asset]:
    """Every file under ``static/`` by name (the package data of this distribution)."""
    root = resources.files("iac_code_console_web").joinpath("static")
    found: dict[str, Asset] = {}
    for entry in root.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in CONTENT_TYPES:
            found[entry.name] = Asset(entry.read_bytes(), CONTENT_TYPES[suffix])
    return found
