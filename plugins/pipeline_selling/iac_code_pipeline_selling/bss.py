"""``bss``: monthly prices from Alibaba Cloud's BssOpenApi (``alibabacloud-bssopenapi20171214``).

Each billable resource kind maps to one price query: ``GetSubscriptionPrice`` for one month of what is sold
by the month (ECS instances and disks, RDS instances), ``GetPayAsYouGoPrice`` × 730 hours for what is billed by
the hour (SLB instances, EIPs). Resources that cost nothing by themselves (VPCs, vSwitches, security groups,
listeners, ...) are ``no charge``. Everything else (usage-billed services such as Function Compute or OSS, and
kinds without a mapping) is reported unpriced with the reason, never priced at 0; so is a resource whose query
failed. Every item and every cost names its source.

Credentials: ``bss-access-key-id`` / ``bss-access-key-secret``, else ``ALIBABA_CLOUD_ACCESS_KEY_ID`` /
``ALIBABA_CLOUD_ACCESS_KEY_SECRET``. Without them the source falls back to the price table and every cost says so
(``fallback``). ``bss-endpoint`` points the SDK elsewhere (e.g. a local test server).

The module codes and configs follow BssOpenApi's documented examples; ``bss`` has been exercised against a local
server speaking the API's wire format, not against the live service.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from iac_code_pipeline_selling.pricing import PriceTableSource, resource_count

logger = logging.getLogger(__name__)

SOURCE = "Alibaba Cloud BssOpenApi"
HOURS_PER_MONTH = 730
CACHE_SECONDS = 3600.0
CONCURRENT_QUERIES = 4

FREE_TYPES = frozenset({
    "ALIYUN::ECS::VPC", "ALIYUN::VPC::VPC", "ALIYUN::ECS::VSwitch", "ALIYUN::VPC::VSwitch",
    "ALIYUN::ECS::SecurityGroup", "ALIYUN::ECS::SecurityGroupIngress", "ALIYUN::ECS::SecurityGroupEgress",
    "ALIYUN::SLB::Listener", "ALIYUN::SLB::BackendServerAttachment", "ALIYUN::RDS::Database", "ALIYUN::RDS::Account",
    "ALIYUN::FC::Service", "ALIYUN::FC::Trigger", "ALIYUN::ApiGateway::Group", "ALIYUN::VPC::EIPAssociation",
})


@dataclass(frozen=True)
class Query:
    """One BssOpenApi price query: which API, product, modules (``(code, config)``), how many, and the spec shown."""

    api: str  # "subscription" or "payg"
    product: str
    modules: tuple[tuple[str, str], ...]
    quantity: int
    spec: str
    product_type: str = ""


def _text(properties: Mapping[str, Any], key: str, default: str) -> str:
    value = properties.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else default


def _number(properties: Mapping[str, Any], key: str, default: int) -> int:
    value = properties.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def query_for(resource: Mapping[str, Any], count: int, region: str) -> Query | None:
    """The price query of one resource, ``None`` when BssOpenApi has none for its kind."""
    rtype = str(resource.get("type", ""))
    props = resource.get("properties") if isinstance(resource.get("properties"), Mapping) else {}
    if rtype in ("ALIYUN::ECS::Instance", "ALIYUN::ECS::InstanceGroup"):
        itype = _text(props, "InstanceType", "ecs.g7.large")
        disk = _text(props, "SystemDiskCategory", "cloud_essd")
        size = _number(props, "SystemDiskSize", 40)
        return Query("subscription", "ecs", (
            ("InstanceType", f"InstanceType:{itype},IoOptimized:IoOptimized,ImageOs:linux"),
            ("SystemDisk", f"SystemDisk.Category:{disk},SystemDisk.Size:{size}")), count,
            f"{itype}, {size} GiB {disk} system disk")
    if rtype == "ALIYUN::ECS::Disk":
        disk = _text(props, "Category", "cloud_essd")
        size = _number(props, "Size", 100)
        return Query("subscription", "ecs", (("DataDisk", f"DataDisk.Category:{disk},DataDisk.Size:{size}"),), count,
                     f"{size} GiB {disk}")
    if rtype == "ALIYUN::RDS::DBInstance":
        engine = _text(props, "Engine", "MySQL")
        version = _text(props, "EngineVersion", "8.0")
        klass = _text(props, "DBInstanceClass", "mysql.n2.medium.1")
        storage = _number(props, "DBInstanceStorage", 50)
        category = _text(props, "Category", "Basic")
        series = "HighAvailability" if category.lower() in ("highavailability", "high_availability") else category
        return Query("subscription", "rds", (
            ("DBInstanceClass", f"DBInstanceClass:{klass},EngineVersion:{version},Region:{region}"),
            ("DBInstanceStorage", f"DBInstanceStorage:{storage}"),
            ("Engine", f"Engine:{engine}"), ("Series", f"Series:{series}")), count,
            f"{engine} {version} {series}, {klass}, {storage} GiB", product_type="rds")
    if rtype == "ALIYUN::SLB::LoadBalancer":
        spec = _text(props, "LoadBalancerSpec", "slb.s1.small")
        return Query("payg", "slb", (("LoadBalancerSpec", f"LoadBalancerSpec:{spec}"),), count,
                     f"CLB {spec}, pay-as-you-go × {HOURS_PER_MONTH} h")
    if rtype in ("ALIYUN::VPC::EIP", "ALIYUN::ECS::EIP"):
        bandwidth = _number(props, "Bandwidth", 5)
        return Query("payg", "eip", (("Bandwidth", f"Bandwidth:{bandwidth},InternetChargeType:PayByTraffic"),), count,
                     f"EIP {bandwidth} Mbps pay by traffic, reservation × {HOURS_PER_MONTH} h")
    return None


class BssError(Exception):
    """A price query that did not give a price; ``code`` is the API's error code (safe to show)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class BssPriceSource:
    """``bss``: see the module docstring."""

    name = "bss"

    def __init__(self, *, access_key_id: str, access_key_secret: str, endpoint: str, region: str,
                 fallback: PriceTableSource) -> None:
        self._key_id = access_key_id
        self._secret = access_key_secret
        self.endpoint = endpoint
        self.region = region or "cn-hangzhou"
        self.fallback = fallback
        self._cache: dict[tuple[Any, ...], tuple[float, float, str]] = {}
        self._clients: dict[str, Any] = {}

    def __repr__(self) -> str:  # never the secret
        return f"BssPriceSource(endpoint={self.endpoint!r}, region={self.region!r}, credentials={self.configured})"

    @classmethod
    def from_config(cls, config: Any, *, fallback: PriceTableSource,
                    environ: Mapping[str, str] | None = None) -> BssPriceSource:
        env = os.environ if environ is None else environ
        key_id = str(getattr(config, "bss_access_key_id", "") or "").strip() or env.get(
            "ALIBABA_CLOUD_ACCESS_KEY_ID", "").strip()
        secret = str(getattr(config, "bss_access_key_secret", "") or "").strip() or env.get(
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "").strip()
        source = cls(access_key_id=key_id, access_key_secret=secret,
                     endpoint=str(getattr(config, "bss_endpoint", "") or "").strip(),
                     region=str(getattr(config, "bss_region", "") or "").strip(), fallback=fallback)
        if not source.configured:
            logger.warning("price-source: bss has no Alibaba Cloud credentials (bss-access-key-id/-secret or "
                           "ALIBABA_CLOUD_ACCESS_KEY_ID/_SECRET): costs come from the price table, and say so")
        return source

    @property
    def configured(self) -> bool:
        """Whether credentials are configured (else every estimate falls back to the price table)."""
        return bool(self._key_id and self._secret)

    @property
    def disclaimer(self) -> str:
        if not self.configured:
            return (f"BssOpenApi is not configured (no credentials); {self.fallback.disclaimer}")
        return (f"Prices from {SOURCE} for the queried region on the date shown: one month of subscription, or "
                f"pay-as-you-go × {HOURS_PER_MONTH} hours; usage-based charges (traffic, requests, storage used) "
                "are not included.")

    # ------------------------------------------------------------------ the SDK

    def _client(self, region: str) -> Any:
        client = self._clients.get(region)
        if client is None:
            from alibabacloud_bssopenapi20171214.client import Client
            from alibabacloud_tea_openapi import utils_models

            config = utils_models.Config(access_key_id=self._key_id, access_key_secret=self._secret,
                                         region_id=region, connect_timeout=5000, read_timeout=15000)
            if self.endpoint:
                parts = urlsplit(self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}")
                config.endpoint = parts.netloc
                config.protocol = parts.scheme or "https"
            client = self._clients[region] = Client(config)
        return client

    async def _price(self, query: Query, region: str) -> tuple[float, str]:
        """One month of ``query`` in ``region``: (amount, currency); :class:`BssError` when there is no price."""
        key = (query.api, query.product, query.product_type, query.modules, query.quantity, region)
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        from alibabacloud_bssopenapi20171214 import models
        from alibabacloud_tea_openapi.exceptions import AlibabaCloudException

        client = self._client(region)
        try:
            if query.api == "subscription":
                request = models.GetSubscriptionPriceRequest(
                    product_code=query.product, product_type=query.product_type or None, region=region,
                    subscription_type="Subscription", order_type="NewOrder", service_period_quantity=1,
                    service_period_unit="Month", quantity=query.quantity,
                    module_list=[models.GetSubscriptionPriceRequestModuleList(module_code=code, config=config)
                                 for code, config in query.modules])
                body = (await client.get_subscription_price_async(request)).body
                data = body.data
                if not body.success or data is None or data.trade_price is None:
                    raise BssError(str(body.code or "NoPrice"))
                amount, currency = float(data.trade_price), str(data.currency or "CNY")
            else:
                request = models.GetPayAsYouGoPriceRequest(
                    product_code=query.product, product_type=query.product_type or None, region=region,
                    subscription_type="PayAsYouGo",
                    module_list=[models.GetPayAsYouGoPriceRequestModuleList(module_code=code, config=config,
                                                                            price_type="Hour")
                                 for code, config in query.modules])
                body = (await client.get_pay_as_you_go_price_async(request)).body
                data = body.data
                details = data.module_details.module_detail if data is not None and data.module_details else None
                if not body.success or not details:
                    raise BssError(str(body.code or "NoPrice"))
                hourly = sum(float(d.cost_after_discount if d.cost_after_discount is not None else d.original_cost or 0)
                             for d in details)
                amount, currency = hourly * HOURS_PER_MONTH * query.quantity, str(data.currency or "CNY")
        except BssError:
            raise
        except AlibabaCloudException as exc:
            raise BssError(str(getattr(exc, "code", "") or "RequestFailed")) from None
        except Exception as exc:  # the SDK's transport raises its own types for connection problems and timeouts
            raise BssError(type(exc).__name__) from None
        self._cache[key] = (time.monotonic(), amount, currency)
        return amount, currency

    # ------------------------------------------------------------------ the estimate

    async def estimate(self, resources: Sequence[Mapping[str, Any]], *, region: str = "") -> dict[str, Any]:
        """The cost of ``resources`` from BssOpenApi (see the module docstring); the price table's, saying so,
        without credentials."""
        if not self.configured:
            cost = await self.fallback.estimate(resources, region=region)
            cost["fallback"] = {"from": "bss", "reason": "no Alibaba Cloud credentials configured"}
            cost["disclaimer"] = self.disclaimer
            return cost
        region = region or self.region
        today = datetime.datetime.now(datetime.UTC).date().isoformat()
        limit = asyncio.Semaphore(CONCURRENT_QUERIES)

        async def item(resource: Mapping[str, Any]) -> tuple[dict[str, Any], float, str]:
            rtype = str(resource.get("type", ""))
            name = str(resource.get("name", "") or rtype)
            count = resource_count(resource)
            base = {"name": name, "type": rtype, "count": count, "price_source": SOURCE}
            if rtype in FREE_TYPES:
                return {**base, "spec": "no charge", "monthly_cost": "no charge", "priced": True}, 0.0, ""
            query = query_for(resource, count, region)
            if query is None:
                reason = "BssOpenApi has no price query for this resource type (usage-based or not mapped)"
                return {**base, "spec": "", "monthly_cost": f"not priced: {reason}", "priced": False,
                        "reason": reason}, 0.0, ""
            try:
                async with limit:
                    amount, currency = await self._price(query, region)
            except BssError as exc:
                logger.warning("bss: price query for %s failed: %s", rtype, exc.code)
                reason = f"BssOpenApi price query failed ({exc.code[:80]})"
                return {**base, "spec": query.spec, "monthly_cost": f"not priced: {reason}", "priced": False,
                        "reason": reason}, 0.0, ""
            spec = f"{count} x {query.spec}" if count > 1 else query.spec
            return {**base, "spec": spec, "monthly_cost": f"{currency} {amount:,.2f}", "priced": True,
                    "api": "GetSubscriptionPrice" if query.api == "subscription" else "GetPayAsYouGoPrice"}, amount, currency

        results = await asyncio.gather(*(item(r) for r in resources))
        currencies = {c for _, _, c in results if c}
        currency = sorted(currencies)[0] if len(currencies) == 1 else ("mixed" if currencies else "CNY")
        total = sum(amount for _, amount, _ in results)
        unpriced = sorted({i["type"] for i, _, _ in results if not i["priced"]})
        total_text = f"{currency} {total:,.2f} / month"
        if unpriced:
            total_text += f" (excluding {sum(1 for i, _, _ in results if not i['priced'])} unpriced resource(s))"
        return {"items": [i for i, _, _ in results], "total_monthly_cost": total_text, "total": round(total, 2),
                "currency": currency, "unpriced_types": unpriced, "price_source": SOURCE, "price_date": today,
                "region": region, "official": True, "disclaimer": self.disclaimer}
