"""Built-in plugin: the server's public signing keys at ``/.well-known/jwks.json``.

Verifiers of the Agent Card (``card-signer: jwks``) and receivers of signed push
notifications (``push-signing: true``) fetch the keys here. Public keys only,
behind the same authentication rule as the Agent Card.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from iac_code.base import jsonio
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import HttpRouteSpec

if TYPE_CHECKING:
    from aiohttp import web

    from iac_code.base.records import PluginContext

JWKS_PATH = "/.well-known/jwks.json"
# Short enough that a rotated key is fetched well within a retired key's grace period.
MAX_AGE = 300


@hookimpl
def iac_code_http_routes(kernel: PluginContext | None) -> list[HttpRouteSpec]:
    push = getattr(kernel, "push", None)
    if kernel is None or not ((push is not None and push.signs) or kernel.signing_keys is not None):
        return []
    from aiohttp import web

    async def jwks(request: web.Request) -> web.Response:
        assert kernel is not None
        body = jsonio.dumps(kernel.public_jwks())
        etag = f'"sha256-{hashlib.sha256(body).hexdigest()}"'
        headers = {"Cache-Control": f"public, max-age={MAX_AGE}", "ETag": etag}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    return [HttpRouteSpec("GET", JWKS_PATH, jwks, name="jwks")]
