"""Built-in plugin: the server's public signing keys at ``/.well-known/jwks.json``.

Receivers of signed push notifications (``push-signing: true``) fetch the keys
here to check the ``X-A2A-Notification-Signature`` JWT. Public keys only, no
authentication: they reveal nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from iac_code import jsonio
from iac_code.hookspecs import hookimpl
from iac_code.records import HttpRouteSpec

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

JWKS_PATH = "/.well-known/jwks.json"


@hookimpl
def iac_code_http_routes(kernel: Kernel | None) -> list[HttpRouteSpec]:
    if kernel is None or not kernel.config.push_signing:
        return []

    async def jwks(_request: web.Request) -> web.Response:
        keys = kernel.push.public_jwks() if kernel is not None and kernel.push is not None else {"keys": []}
        return web.Response(body=jsonio.dumps(keys), content_type="application/json",
                            headers={"Cache-Control": "public, max-age=300"})

    return [HttpRouteSpec("GET", JWKS_PATH, jwks, auth=False, name="jwks")]
