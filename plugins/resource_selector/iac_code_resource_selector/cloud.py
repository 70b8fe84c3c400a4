"""The selector's cloud queries, through Alibaba Cloud's official SDKs: what the user may pick for each profile.

=====================  ====================================================================================
selector               OpenAPI call (RegionId: the question's ``associationPropertyMetadata.RegionId``, else
                       the configured region)
=====================  ====================================================================================
``vpc_id``             VPC ``DescribeVpcs`` (PageNumber/PageSize)
``vswitch_id``         VPC ``DescribeVSwitches`` filtered by ``VpcId``/``ZoneId`` (PageNumber/PageSize)
``security_group_id``  ECS ``DescribeSecurityGroups`` filtered by ``VpcId`` (NextToken/MaxResults)
``ecs_instance_type``  ECS ``DescribeAvailableResource`` (``DestinationResource=InstanceType``, ``ZoneId``,
                       ``InstanceChargeType``, default ``PostPaid``): the types with status ``Available``
=====================  ====================================================================================

:meth:`CloudQuery.options` lists at most :data:`MAX_OPTIONS` options (and says whether that was all of them);
:meth:`CloudQuery.find` asks for one value with the same filters (the id filter of the call), so an answer is
checked against the cloud whatever the listing's bound. The SDK clients are blocking: each query runs in a thread
(``asyncio.to_thread``) under one overall timeout, and the SDK's own connect/read timeouts are the same bound so
the thread ends too.

Failures are :class:`QueryError` whose text is fixed by this module (the call, and the cloud's error code when it
is a plain code): never the SDK's message, a URL, a signature, a credential or a local path.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from iac_code.api import split_endpoint

from iac_code_resource_selector.settings import QuerySettings

# The SDKs are imported where a query runs, not with the plugin: the ECS SDK alone takes seconds to import, and
# every server and CLI start loads the plugin.

logger = logging.getLogger(__name__)

MAX_OPTIONS = 100
PAGE_SIZE = 50
MAX_PAGES = 20  # a listing never reads more than this many pages
REGION = re.compile(r"[a-z][a-z0-9-]{1,62}")
FILTER = re.compile(r"[A-Za-z0-9._:-]{1,128}")
CODE = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,99}")
REFERENCE = re.compile(r"\$\{[^}]*\}")
SDK_DEBUG_LOGGER = "darabonba-core"


def _quiet_sdk_debug() -> None:
    """The SDK core's HTTP debug log (``DEBUG=sdk``) prints request headers, the signature and security token
    among them, through a handler of its own: drop its records, whatever the environment says."""
    sdk_logger = logging.getLogger(SDK_DEBUG_LOGGER)
    if not any(getattr(f, "iac_code_quiet", False) for f in sdk_logger.filters):
        def drop(record: logging.LogRecord) -> bool:
            return False

        drop.iac_code_quiet = True  # type: ignore[attr-defined]
        sdk_logger.addFilter(drop)


_quiet_sdk_debug()


@dataclass(frozen=True)
class Option:
    """One thing the user may pick: the parameter's value and what to show."""

    value: str
    label: str

    def to_json(self) -> dict[str, str]:
        return {"value": self.value, "label": self.label}


@dataclass(frozen=True)
class Listing:
    """What a listing found (at most :data:`MAX_OPTIONS`) and whether it was everything."""

    options: tuple[Option, ...]
    complete: bool


class QueryError(Exception):
    """A cloud query that could not be answered; ``str()`` is safe to show (see the module docstring)."""


def _items(body: Mapping[str, Any], outer: str, inner: str) -> list[dict[str, Any]]:
    box = body.get(outer)
    items = box.get(inner) if isinstance(box, Mapping) else None
    return [dict(i) for i in items or [] if isinstance(i, Mapping)]


def _label(*parts: Any) -> str:
    return " · ".join(str(p) for p in parts if isinstance(p, str) and p.strip())[:1024]


@dataclass(frozen=True)
class _Call:
    """One selector's query: its product and action (for errors) and the blocking function that runs it."""

    product: str
    action: str
    run: Callable[[Any, str, Mapping[str, str], str | None, int], tuple[list[Option], bool]]


def _body(response: Any) -> dict[str, Any]:
    body = response.body.to_map() if getattr(response, "body", None) is not None else {}
    return body if isinstance(body, dict) else {}


def _paged(fetch: Callable[[int], dict[str, Any]], outer: str, inner: str, option: Callable[[dict[str, Any]], Option],
           limit: int) -> tuple[list[Option], bool]:
    """PageNumber/PageSize pages until ``limit`` options, ``TotalCount`` or an empty page."""
    options: list[Option] = []
    for page in range(1, MAX_PAGES + 1):
        body = fetch(page)
        items = _items(body, outer, inner)
        options.extend(option(i) for i in items)
        total = body.get("TotalCount")
        seen = (page - 1) * PAGE_SIZE + len(items)
        more = bool(items) and (seen < total if isinstance(total, int) else len(items) >= PAGE_SIZE)
        if len(options) >= limit or not more:
            return options[:limit], not more and len(options) <= limit
    return options[:limit], False


def _vpcs(client: Any, region: str, meta: Mapping[str, str], value: str | None,
          limit: int) -> tuple[list[Option], bool]:
    from alibabacloud_vpc20160428 import models as vpc_models

    def fetch(page: int) -> dict[str, Any]:
        return _body(client.describe_vpcs(vpc_models.DescribeVpcsRequest(
            region_id=region, vpc_id=value, page_number=page, page_size=PAGE_SIZE)))

    return _paged(fetch, "Vpcs", "Vpc", lambda i: Option(str(i.get("VpcId") or ""), _label(
        i.get("VpcName") or i.get("VpcId"), i.get("CidrBlock"))), limit)


def _vswitches(client: Any, region: str, meta: Mapping[str, str], value: str | None,
               limit: int) -> tuple[list[Option], bool]:
    from alibabacloud_vpc20160428 import models as vpc_models

    def fetch(page: int) -> dict[str, Any]:
        return _body(client.describe_vswitches(vpc_models.DescribeVSwitchesRequest(
            region_id=region, vpc_id=meta.get("VpcId"), zone_id=meta.get("ZoneId"), v_switch_id=value,
            page_number=page, page_size=PAGE_SIZE)))

    return _paged(fetch, "VSwitches", "VSwitch", lambda i: Option(str(i.get("VSwitchId") or ""), _label(
        i.get("VSwitchName") or i.get("VSwitchId"), i.get("CidrBlock"), i.get("ZoneId"))), limit)


def _security_groups(client: Any, region: str, meta: Mapping[str, str], value: str | None,
                     limit: int) -> tuple[list[Option], bool]:
    from alibabacloud_ecs20140526 import models as ecs_models

    options: list[Option] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        body = _body(client.describe_security_groups(ecs_models.DescribeSecurityGroupsRequest(
            region_id=region, vpc_id=meta.get("VpcId"), security_group_id=value, max_results=PAGE_SIZE,
            next_token=token)))
        options.extend(Option(str(i.get("SecurityGroupId") or ""), _label(
            i.get("SecurityGroupName") or i.get("SecurityGroupId"), i.get("Description")))
            for i in _items(body, "SecurityGroups", "SecurityGroup"))
        token = body.get("NextToken") if isinstance(body.get("NextToken"), str) and body.get("NextToken") else None
        if len(options) >= limit or token is None:
            return options[:limit], token is None and len(options) <= limit
    return options[:limit], False


def _instance_types(client: Any, region: str, meta: Mapping[str, str], value: str | None,
                    limit: int) -> tuple[list[Option], bool]:
    from alibabacloud_ecs20140526 import models as ecs_models

    body = _body(client.describe_available_resource(ecs_models.DescribeAvailableResourceRequest(
        region_id=region, destination_resource="InstanceType", zone_id=meta.get("ZoneId"), instance_type=value,
        instance_charge_type=meta.get("InstanceChargeType") or "PostPaid")))
    zones: dict[str, set[str]] = {}
    for zone in _items(body, "AvailableZones", "AvailableZone"):
        for resource in _items(zone, "AvailableResources", "AvailableResource"):
            for supported in _items(resource, "SupportedResources", "SupportedResource"):
                name = supported.get("Value")
                if isinstance(name, str) and name and supported.get("Status") == "Available":
                    zones.setdefault(name, set()).add(str(zone.get("ZoneId") or ""))
    options = [Option(name, _label(name, ", ".join(sorted(z for z in zones[name] if z))))
               for name in sorted(zones) if value is None or name == value]
    return options[:limit], len(options) <= limit


CALLS: Mapping[str, _Call] = {
    "vpc_id": _Call("VPC", "DescribeVpcs", _vpcs),
    "vswitch_id": _Call("VPC", "DescribeVSwitches", _vswitches),
    "security_group_id": _Call("ECS", "DescribeSecurityGroups", _security_groups),
    "ecs_instance_type": _Call("ECS", "DescribeAvailableResource", _instance_types),
}
FILTERS = ("VpcId", "ZoneId", "InstanceChargeType")


def _error(call: _Call, exc: BaseException) -> QueryError:
    """The SDK's failure as a fixed text: the cloud's error code when it answered with a plain one."""
    code = getattr(exc, "code", None)
    status = getattr(exc, "status_code", None)
    if isinstance(code, str) and CODE.fullmatch(code) and (isinstance(status, int) or getattr(exc, "data", None)):
        logger.warning("Resource selector: %s %s failed with %s", call.product, call.action, code)
        return QueryError(f"{call.product} {call.action} failed ({code})")
    logger.warning("Resource selector: %s %s failed: %s", call.product, call.action, type(exc).__name__)
    return QueryError(f"the {call.product} endpoint could not be reached")


def _load_sdks() -> None:
    """Import the SDK modules the queries use (cached by Python after the first time)."""
    import alibabacloud_ecs20140526.client  # noqa: F401
    import alibabacloud_ecs20140526.models  # noqa: F401
    import alibabacloud_tea_openapi.utils_models  # noqa: F401
    import alibabacloud_vpc20160428.client  # noqa: F401
    import alibabacloud_vpc20160428.models  # noqa: F401


class CloudQuery:
    """The selector's queries with one set of credentials (see the module docstring)."""

    def __init__(self, settings: QuerySettings) -> None:
        if settings.credentials is None:
            raise ValueError("CloudQuery needs credentials")
        self.settings = settings
        _load_sdks()  # once, when the server starts with credentials: not inside a query's timeout

    @classmethod
    def from_settings(cls, settings: QuerySettings) -> CloudQuery | None:
        """The queries of ``settings``, ``None`` without credentials (then nothing is queried)."""
        return cls(settings) if settings.credentials is not None else None

    def region(self, metadata: Mapping[str, Any]) -> str:
        """The region a question lists: its ``RegionId``, else the configured one (``QueryError`` if malformed)."""
        region = metadata.get("RegionId")
        if not isinstance(region, str) or not region.strip() or REFERENCE.fullmatch(region.strip()):
            return self.settings.region
        if not REGION.fullmatch(region.strip()):
            raise QueryError("associationPropertyMetadata.RegionId is invalid")
        return region.strip()

    @staticmethod
    def filters(metadata: Mapping[str, Any]) -> dict[str, str]:
        """The question's filters (``VpcId``, ``ZoneId``, ``InstanceChargeType``); an unresolved ROS reference
        (``${...}``) filters nothing; a malformed value is a ``QueryError``."""
        found: dict[str, str] = {}
        for key in FILTERS:
            value = metadata.get(key)
            if not isinstance(value, str) or not value.strip() or REFERENCE.fullmatch(value.strip()):
                continue
            if not FILTER.fullmatch(value.strip()):
                raise QueryError(f"associationPropertyMetadata.{key} is invalid")
            found[key] = value.strip()
        return found

    def _client(self, product: str, region: str) -> Any:
        from alibabacloud_tea_openapi.utils_models import Config

        if product == "VPC":
            from alibabacloud_vpc20160428.client import Client
        else:
            from alibabacloud_ecs20140526.client import Client
        credentials = self.settings.credentials
        assert credentials is not None
        endpoint = self.settings.vpc_endpoint if product == "VPC" else self.settings.ecs_endpoint
        host, protocol = split_endpoint(endpoint)
        timeout_ms = int(self.settings.timeout * 1000)
        config = Config(access_key_id=credentials.access_key_id, access_key_secret=credentials.access_key_secret,
                        security_token=credentials.security_token or None, region_id=region, endpoint=host,
                        protocol=protocol, connect_timeout=timeout_ms, read_timeout=timeout_ms)
        return Client(config)

    async def _run(self, selector_id: str, metadata: Mapping[str, Any], value: str | None,
                   limit: int) -> tuple[list[Option], bool]:
        call = CALLS.get(selector_id)
        if call is None:
            raise QueryError("the selector has no cloud query")
        region = self.region(metadata)
        filters = self.filters(metadata)

        def blocking() -> tuple[list[Option], bool]:
            return call.run(self._client(call.product, region), region, filters, value, limit)

        try:
            return await asyncio.wait_for(asyncio.to_thread(blocking), self.settings.timeout)
        except TimeoutError:
            logger.warning("Resource selector: %s %s timed out", call.product, call.action)
            raise QueryError(f"{call.product} {call.action} timed out") from None
        except QueryError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK or network failure becomes a QueryError
            raise _error(call, exc) from None

    async def options(self, selector_id: str, metadata: Mapping[str, Any]) -> Listing:
        """What the user may pick for ``selector_id`` under ``metadata``: at most :data:`MAX_OPTIONS`."""
        options, complete = await self._run(selector_id, metadata, None, MAX_OPTIONS)
        return Listing(tuple(o for o in options if o.value), complete)

    async def find(self, selector_id: str, metadata: Mapping[str, Any], value: str) -> Option | None:
        """The option ``value`` when the cloud has it under ``metadata``, else ``None``."""
        options, _ = await self._run(selector_id, metadata, value, MAX_OPTIONS)
        return next((o for o in options if o.value == value), None)
