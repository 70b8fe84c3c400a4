"""Serving a scrape: the ``/metrics`` handler, and ``metrics-port`` (``/metrics`` alone on a private port)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from iac_code.api import StartupError

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"


class Scrapable(Protocol):
    """What a scrape reads: the registry, refreshed from the server's state first."""

    async def refresh(self) -> None: ...

    def exposition(self) -> bytes: ...


def scrape_handler(metrics: Scrapable) -> Any:
    """The aiohttp handler answering a scrape: the server's state read, then the text exposition."""

    async def scrape(request: web.Request) -> web.Response:
        await metrics.refresh()
        return web.Response(body=metrics.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})

    return scrape


class MetricsPort:
    """``/metrics`` alone on ``metrics-host:metrics-port`` (no authentication: a private scrape port)."""

    def __init__(self, metrics: Scrapable) -> None:
        self._metrics = metrics
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Bind and serve; the bound port."""
        app = web.Application()
        app.router.add_get(METRICS_PATH, scrape_handler(self._metrics), allow_head=False)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise StartupError(f"Cannot bind metrics-port to {host}:{port}: {exc.strerror or type(exc).__name__}.") \
                from None
        self._runner = runner
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        logger.info("Prometheus metrics on http://%s:%d%s", host, self.port, METRICS_PATH)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
