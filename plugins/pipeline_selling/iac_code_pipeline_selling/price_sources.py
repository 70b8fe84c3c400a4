"""The price sources the selling pipelines price candidates with (``iac_code_price_sources``), and the choice
among every installed one (``price-source``).

Built in: ``price-table`` (a YAML price file, ``pricing-file``; the shipped sample by default, which says in every
cost it produces that it is an illustrative sample with its date) and ``bss`` (Alibaba Cloud's BssOpenApi price
queries, :mod:`.bss`). A third party ships another through the same hook and names it in ``price-source``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code.api import PipelineServices, PluginContext, PriceSource, PriceSourceSpec, StartupError, normalise_name
from iac_code_pipeline_selling.pricing import SAMPLE_TABLE, PriceTable, PriceTableSource

logger = logging.getLogger(__name__)

DEFAULT_SOURCE = PriceTableSource.name


class PriceConfig(BaseModel):
    """The keys that choose and configure the price source of the selling pipelines' cost step."""

    model_config = ConfigDict(extra="forbid")

    price_source: str = Field(DEFAULT_SOURCE, description="Where candidate costs come from: price-table (the YAML "
                              "price file), bss (Alibaba Cloud BssOpenApi, with credentials) or another installed "
                              "price source plugin's name.")
    pricing_file: str = Field("", description="The YAML price file of price-table (source, date, currency, official, "
                              "resources); empty: the shipped illustrative sample.")
    bss_endpoint: str = Field("", description="BssOpenApi endpoint (host, or http(s)://host:port); empty: the "
                              "SDK's endpoint for bss-region.")
    bss_region: str = Field("cn-hangzhou", description="Region whose prices bss queries when the request names none.")
    bss_access_key_id: str = Field("", description="AccessKey id for bss (env ALIBABA_CLOUD_ACCESS_KEY_ID).")
    bss_access_key_secret: str = Field("", description="AccessKey secret for bss (env "
                                       "ALIBABA_CLOUD_ACCESS_KEY_SECRET); never logged or echoed.")

    @field_validator("price_source")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("'price-source': must name a price source (price-table, bss, or a plugin's)")
        return value.strip()


def load_table(config: Any) -> PriceTable:
    """The ``pricing-file`` (the shipped sample when empty); a :class:`StartupError` naming the key if it is bad."""
    configured = str(getattr(config, "pricing_file", "") or "").strip()
    path = Path(configured).expanduser() if configured else SAMPLE_TABLE
    try:
        return PriceTable.load(path)
    except (ValueError, KeyError, TypeError) as exc:
        what = f"pricing-file {configured!r}" if configured else "The shipped sample price table"
        raise StartupError(f"{what} {exc}.") from None


def create_price_table(context: PluginContext) -> PriceTableSource:
    return PriceTableSource(load_table(getattr(context, "config", None)))


def create_bss(context: PluginContext) -> PriceSource:
    from iac_code_pipeline_selling.bss import BssPriceSource

    return BssPriceSource.from_config(getattr(context, "config", None),
                                      fallback=PriceTableSource(load_table(getattr(context, "config", None))))


def builtin_price_sources() -> list[PriceSourceSpec]:
    """The two price sources this plugin provides."""
    return [PriceSourceSpec(name=DEFAULT_SOURCE, create=create_price_table,
                            description="A YAML price file (pricing-file); the shipped one is an illustrative sample."),
            PriceSourceSpec(name="bss", create=create_bss,
                            description="Alibaba Cloud BssOpenApi price queries (GetSubscriptionPrice, "
                                        "GetPayAsYouGoPrice) with the configured credentials.")]


def price_source_for(services: PipelineServices) -> PriceSource:
    """The price source ``price-source`` names among the installed ones (this plugin's own when the kernel
    handed none); a :class:`StartupError` listing the installed ones for an unknown name."""
    config = getattr(services.context, "config", None)
    wanted = normalise_name(str(getattr(config, "price_source", DEFAULT_SOURCE) or DEFAULT_SOURCE))
    specs = {normalise_name(spec.name): spec for spec in builtin_price_sources()}
    specs.update({normalise_name(name): spec for name, spec in services.price_sources.items()})
    spec = specs.get(wanted)
    if spec is None:
        raise StartupError(f"price-source {wanted!r} is not an installed price source; installed: "
                           f"{', '.join(sorted(specs))}.")
    return spec.create(services.context)
