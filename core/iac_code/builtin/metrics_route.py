"""Built-in plugin: Prometheus metrics at ``GET /metrics`` (text exposition format).

Configuration keys: ``metrics`` (default true; false: no route and no
instrumentation) and ``metrics-public`` (default false: the route is
authenticated like every other route; true: open, e.g. for a scraper inside a
private network). The metrics themselves live in :mod:`iac_code.metrics`, one
registry per kernel (``kernel.metrics``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.config import without_effect
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
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Also serve /metrics, without authentication, on this port of "
        "metrics-host (a private scrape port; unset: off, 0: a free port).")
    metrics_host: str = Field("127.0.0.1", description="Bind host of metrics-port.")


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return MetricsConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    """``metrics-public``/``-port``/``-host`` need ``metrics``; ``metrics-host`` needs ``metrics-port``."""
    if not config.metrics:
        return without_effect(config, ("metrics_public", "metrics_port", "metrics_host"), "metrics: true")
    if config.metrics_port is None:
        return without_effect(config, ("metrics_host",), "metrics-port")
    return []


@hookimpl
def iac_code_http_routes(kernel: Kernel | None) -> list[HttpRouteSpec]:
    if kernel is None:
        return []
    metrics = getattr(kernel, "metrics", None)
    if metrics is None:
        return []
    from iac_code.metrics import scrape_handler

    public = bool(getattr(kernel.config, "metrics_public", False))
    return [HttpRouteSpec("GET", METRICS_PATH, scrape_handler(kernel, metrics), auth=not public, name="metrics")]
