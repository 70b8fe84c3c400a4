"""A local stand-in for the Alibaba Cloud ECS and VPC OpenAPIs (RPC style), as the official Python SDKs call them.

A real aiohttp server on ``127.0.0.1`` (ephemeral port). The SDK (ACS3 signature) sends ``POST /`` with the action
in the ``x-acs-action`` header and the parameters in the query string (the older RPC signature puts ``Action=`` in
the query; both are read). Answers are the JSON the SDK models parse: ``DescribeVpcs`` / ``DescribeVSwitches``
page with ``PageNumber``/``PageSize`` (``TotalCount``), ``DescribeSecurityGroups`` with ``NextToken``/``MaxResults``,
``DescribeAvailableResource`` lists the zones' instance types. Every request is recorded (action, parameters,
headers) so a test sees what reached "the cloud".

``fail[action] = (status, body)`` answers that action with an error; ``hang`` holds every answer until the
stand-in stops (for timeouts).

Example::

    async with OpenApiFake() as cloud:
        cloud.vpcs["cn-hangzhou"] = [vpc("vpc-abc123", "prod-vpc")]
        ...  # resource-selector-vpc-endpoint: cloud.endpoint
        assert cloud.actions() == ["DescribeVpcs"]
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["OpenApiFake", "Received", "instance_zone", "security_group", "vpc", "vswitch"]


@dataclass
class Received:
    """One request the stand-in received."""

    action: str
    params: dict[str, str]
    headers: dict[str, str]
    body: str


def vpc(vpc_id: str, name: str = "", cidr: str = "172.16.0.0/12") -> dict[str, Any]:
    return {"VpcId": vpc_id, "VpcName": name, "CidrBlock": cidr, "Status": "Available"}


def vswitch(vsw_id: str, vpc_id: str, zone: str, name: str = "", cidr: str = "172.16.0.0/24") -> dict[str, Any]:
    return {"VSwitchId": vsw_id, "VpcId": vpc_id, "ZoneId": zone, "VSwitchName": name, "CidrBlock": cidr,
            "Status": "Available"}


def security_group(sg_id: str, vpc_id: str, name: str = "") -> dict[str, Any]:
    return {"SecurityGroupId": sg_id, "VpcId": vpc_id, "SecurityGroupName": name, "Description": "",
            "SecurityGroupType": "normal"}


def instance_zone(zone: str, types: dict[str, str]) -> dict[str, Any]:
    """One zone of DescribeAvailableResource: ``types`` maps an instance type to its status."""
    return {"ZoneId": zone, "Status": "Available", "AvailableResources": {"AvailableResource": [
        {"Type": "InstanceType", "SupportedResources": {"SupportedResource": [
            {"Value": name, "Status": status, "StatusCategory": "WithStock" if status == "Available" else
             "ClosedWithoutStock"} for name, status in types.items()]}}]}}


@dataclass
class OpenApiFake:
    """The stand-in (see the module docstring); resources are per region."""

    vpcs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    vswitches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    security_groups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    zones: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fail: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    hang: bool = False
    requests: list[Received] = field(default_factory=list)
    endpoint: str = ""
    _runner: web.AppRunner | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def actions(self) -> list[str]:
        return [r.action for r in self.requests]

    async def __aenter__(self) -> OpenApiFake:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.endpoint = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop answering (the port is closed: a client then cannot connect)."""
        self._stop.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        body = await request.text() if request.can_read_body else ""
        if body and request.content_type == "application/x-www-form-urlencoded":
            params.update({k: str(v) for k, v in (await request.post()).items()})
        action = request.headers.get("x-acs-action") or params.get("Action", "")
        self.requests.append(Received(action, params, dict(request.headers), body))
        if self.hang:
            await self._stop.wait()
        request_id = str(uuid.uuid4()).upper()
        if action in self.fail:
            status, error = self.fail[action]
            return web.json_response({"RequestId": request_id, **error}, status=status)
        answer = getattr(self, "_" + action, None)
        if answer is None:
            return web.json_response({"RequestId": request_id, "Code": "InvalidAction.NotFound",
                                      "Message": f"Specified api is not found: {action}"}, status=404)
        return web.json_response({"RequestId": request_id, **answer(params)})

    @staticmethod
    def _page(params: dict[str, str], items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        number = int(params.get("PageNumber", "1"))
        size = int(params.get("PageSize", "10"))
        page = items[(number - 1) * size:number * size]
        return page, {"TotalCount": len(items), "PageNumber": number, "PageSize": size}

    @staticmethod
    def _match(item: dict[str, Any], params: dict[str, str], keys: dict[str, str]) -> bool:
        return all(params.get(param) in (None, "") or item.get(key) == params[param] for param, key in keys.items())

    def _DescribeVpcs(self, params: dict[str, str]) -> dict[str, Any]:
        items = [v for v in self.vpcs.get(params.get("RegionId", ""), []) if self._match(v, params, {"VpcId": "VpcId"})]
        page, paging = self._page(params, items)
        return {"Vpcs": {"Vpc": page}, **paging}

    def _DescribeVSwitches(self, params: dict[str, str]) -> dict[str, Any]:
        keys = {"VpcId": "VpcId", "ZoneId": "ZoneId", "VSwitchId": "VSwitchId"}
        items = [v for v in self.vswitches.get(params.get("RegionId", ""), []) if self._match(v, params, keys)]
        page, paging = self._page(params, items)
        return {"VSwitches": {"VSwitch": page}, **paging}

    def _DescribeSecurityGroups(self, params: dict[str, str]) -> dict[str, Any]:
        keys = {"VpcId": "VpcId", "SecurityGroupId": "SecurityGroupId"}
        items = [g for g in self.security_groups.get(params.get("RegionId", ""), []) if self._match(g, params, keys)]
        start = int(params.get("NextToken") or "0")
        size = int(params.get("MaxResults", "10"))
        page = items[start:start + size]
        token = str(start + size) if start + size < len(items) else ""
        return {"SecurityGroups": {"SecurityGroup": page}, "NextToken": token, "RegionId": params.get("RegionId")}

    def _DescribeAvailableResource(self, params: dict[str, str]) -> dict[str, Any]:
        if params.get("DestinationResource") != "InstanceType":
            return {"AvailableZones": {"AvailableZone": []}}
        zones = []
        for zone in self.zones.get(params.get("RegionId", ""), []):
            if params.get("ZoneId") and zone["ZoneId"] != params["ZoneId"]:
                continue
            [resource] = zone["AvailableResources"]["AvailableResource"]
            supported = [s for s in resource["SupportedResources"]["SupportedResource"]
                         if not params.get("InstanceType") or s["Value"] == params["InstanceType"]]
            if supported:
                zones.append({**zone, "AvailableResources": {"AvailableResource": [
                    {**resource, "SupportedResources": {"SupportedResource": supported}}]}})
        return {"AvailableZones": {"AvailableZone": zones}}
