"""Plugin registration: Prometheus metrics at ``GET /metrics`` (text exposition format).

Configuration keys: ``metrics`` (default true; false: no route and no instrumentation),
``metrics-public`` (default false: the route is authenticated like every other route;
true: open, e.g. for a scraper inside a private network), ``metrics-port`` and
``metrics-host`` (``/metrics`` also, without authentication, on a private port). The
metrics themselves live in :mod:`iac_code_metrics.registry`, one registry per server.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import HttpRouteSpec, PluginContext, hookimpl, without_effect
from iac_code_metrics.registry import PrometheusMetrics, metrics_of
from iac_code_metrics.scrape import METRICS_PATH, scrape_handler

IAC_CODE_API_VERSION = "1.0"


class MetricsConfig(BaseModel):
    """Keys the metrics plugin adds to the configuration."""

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
def iac_code_instrumentation(config: Any) -> PrometheusMetrics | None:
    """A fresh registry per server, or nothing with ``metrics: false``."""
    return PrometheusMetrics() if getattr(config, "metrics", False) else None


@hookimpl
def iac_code_http_routes(kernel: PluginContext | None) -> list[HttpRouteSpec]:
    metrics = metrics_of(kernel)
    if kernel is None or metrics is None:
        return []
    public = bool(getattr(kernel.config, "metrics_public", False))
    return [HttpRouteSpec("GET", METRICS_PATH, scrape_handler(metrics), auth=not public, name="metrics")]
