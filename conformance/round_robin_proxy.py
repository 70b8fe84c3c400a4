"""A round-robin HTTP proxy: each request to the next of several server nodes.

Runs the conformance kit against a cluster (``conformance/cluster-node.yml``, see
docs/conformance.md): every call of a test may land on another node, as behind a
load balancer with no session affinity. Streams (SSE) are passed through as they
come. HTTP only (JSON-RPC and HTTP+JSON); not a production proxy.

    python conformance/round_robin_proxy.py --port 9999 http://127.0.0.1:9101 http://127.0.0.1:9102 ...
"""

from __future__ import annotations

import argparse
import itertools

from aiohttp import ClientSession, ClientTimeout, web

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade",
              "proxy-connection", "te", "trailer", "content-encoding"}


def build_app(upstreams: list[str]) -> web.Application:
    turns = itertools.cycle(upstreams)

    async def forward(request: web.Request) -> web.StreamResponse:
        session: ClientSession = request.app["session"]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        async with session.request(request.method, next(turns) + str(request.rel_url), data=body, headers=headers,
                                   allow_redirects=False, auto_decompress=False) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def session(app: web.Application):  # type: ignore[no-untyped-def]
        app["session"] = ClientSession(timeout=ClientTimeout(total=None, sock_connect=5))
        yield
        await app["session"].close()

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.cleanup_ctx.append(session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("upstreams", nargs="+", help="base URLs of the nodes, e.g. http://127.0.0.1:9101")
    args = parser.parse_args()
    web.run_app(build_app([u.rstrip("/") for u in args.upstreams]), host=args.host, port=args.port,
                access_log=None, print=None)


if __name__ == "__main__":
    main()
