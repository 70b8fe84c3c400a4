"""Built-in plugin: Prometheus metrics at ``GET /metrics`` (text exposition format).

Configuration keys: ``metrics`` (default true; false: no route and no
instrumentation) and ``metrics-public`` (default false: the route is
authenticated like every other route; true: open, e.g. for a scraper inside a
private network). The metrics themselves live in :mod:`iac_code.metrics`, one
registry per kernel (``kernel.metrics``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from iac_code.hookspecs import hookimpl
from iac_code.records import HttpRouteSpec

if TYPE_CHECKING:
    from iac_code.kernel import Kernel

METRICS_PATH = "/metrics"


class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metrics: bool = Field(True, description="Collect Prometheus metrics and serve them at GET /metrics.")
    metrics_public: bool = Field(
        False, description="Serve /metrics without authentication (otherwise it needs the same credentials "
        "as every other route).")


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return MetricsConfig


@hookimpl
def iac_code_http_routes(kernel: Kernel | None) -> list[HttpRouteSpec]:
    if kernel is None:
        return []
    metrics = getattr(kernel, "metrics", None)
    if metrics is None:
        return []
    from prometheus_client import CONTENT_TYPE_LATEST

    async def scrape(request: web.Request) -> web.Response:
        await metrics.refresh(kernel)
        return web.Response(body=metrics.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})

    public = bool(getattr(kernel.config, "metrics_public", False))
    return [HttpRouteSpec("GET", METRICS_PATH, scrape, auth=not public, name="metrics")]
