"""The entry point: the console's routes on the HTTP transport (``iac_code_http_routes``).

``GET /console`` is the page, ``GET /console/static/<name>`` its modules and styles. The page and its
assets are the same bytes for everyone and hold no data, so they are served without authentication
(like ``/health``): a browser cannot attach a header to a navigation, and the sign-in form is part of
the page. Everything with task content goes through the server's authenticated A2A API, with the
credential the person typed sent as a header. Every console response carries a strict
Content-Security-Policy and ``Cache-Control: no-store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from iac_code.api import HttpRouteSpec, PluginContext, hookimpl
from iac_code_console_web.assets import SECURITY_HEADERS, load_assets

IAC_CODE_API_VERSION = "1.0"
CONSOLE_PATH = "/console"
STATIC_PREFIX = "/console/static/"
PAGE = "index.html"
Handler = Callable[[web.Request], Awaitable[web.Response]]


def console_routes() -> list[HttpRouteSpec]:
    """The page and one literal route per shipped file, read once from the package data.

    Literal paths (not ``{name}``): the transport exempts a route from authentication by its exact path.
    """
    assets = load_assets()

    def serve(name: str) -> Handler:
        asset = assets[name]

        async def handle(request: web.Request) -> web.Response:
            return web.Response(body=asset.body, headers={"Content-Type": asset.content_type, **SECURITY_HEADERS})

        return handle

    routes = [HttpRouteSpec("GET", CONSOLE_PATH, serve(PAGE), auth=False, name="console")]
    routes += [HttpRouteSpec("GET", f"{STATIC_PREFIX}{name}", serve(name), auth=False)
               for name in sorted(assets) if name != PAGE]
    return routes


@hookimpl
def iac_code_http_routes(kernel: PluginContext | None) -> list[HttpRouteSpec]:
    if kernel is None:
        return []
    return console_routes()
