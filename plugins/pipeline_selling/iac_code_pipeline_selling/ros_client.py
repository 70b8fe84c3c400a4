"""The few ROS (Resource Orchestration Service) calls a deploy makes, through Alibaba Cloud's official SDK
(``alibabacloud-ros20190910``, its ``*_async`` methods): CreateStack, ContinueCreateStack (a ``CREATE_FAILED`` stack),
GetStack, ListStackResources, ListStacks and DeleteStack (a ``cleanupOnly`` continuation, a ``delete_and_create``).

Failures are :class:`RosError` with a sanitised message (no secret, signature, request query or local path) and
whether trying again may help (network errors, throttling, 5xx); the credentials never appear in a ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from alibabacloud_ros20190910 import models as ros_models
from alibabacloud_ros20190910.client import Client
from alibabacloud_tea_openapi.utils_models import Config

from iac_code.api import split_endpoint

CONNECT_TIMEOUT_MS = 5_000
READ_TIMEOUT_MS = 30_000
IN_PROGRESS_SUFFIX = "_IN_PROGRESS"
SUCCESS_STATUS = "CREATE_COMPLETE"
DELETED_STATUS = "DELETE_COMPLETE"
NOT_FOUND = "StackNotFound"
RETRYABLE_CODES = ("Throttling", "ServiceUnavailable", "InternalError", "LastTokenProcessing")


@dataclass(frozen=True)
class RosCredentials:
    """An AccessKey pair (and an STS token when there is one)."""

    access_key_id: str
    access_key_secret: str = field(repr=False)
    security_token: str = field(default="", repr=False)

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown."""
        return tuple(s for s in (self.access_key_secret, self.security_token) if s)


_PATH = re.compile(r"(?<![\w:/.])(?:/[\w.@+-]+){2,}/?|[A-Za-z]:\\[^\s'\"]+")
_QUERY = re.compile(r"(https?://[^\s?'\"]+)\?[^\s'\"]*")
_SIGNED = re.compile(r"(Signature|AccessKeySecret|SecurityToken|access_key_secret|security_token|Credential)"
                     r"([=:]\s*['\"]?)[^\s&'\",}]+", re.I)
_ACCESS_KEY_ID = re.compile(r"\b(LTAI|STS\.)[A-Za-z0-9]{6,}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def sanitise(message: str, secrets: Sequence[str] = (), limit: int = 500) -> str:
    """``message`` fit to show: secrets, signatures, AccessKey ids, request queries and local paths masked, control
    characters dropped, at most ``limit`` characters."""
    text = str(message)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _QUERY.sub(r"\1?<query omitted>", text)
    text = _SIGNED.sub(r"\1\2***", text)
    text = _ACCESS_KEY_ID.sub(r"\1***", text)
    text = _PATH.sub("<path>", text)
    text = _CONTROL.sub(" ", text)
    return text[:limit]


class RosError(Exception):
    """A ROS call that failed: ``code`` (ROS's error code, or the kind of network failure), a sanitised
    ``message``, and whether the same call may succeed later (``retryable``)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status


def _error(exc: BaseException, secrets: Sequence[str]) -> RosError:
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException) and getattr(exc, "code", None) is None:
        exc = inner  # the SDK wraps network failures
    code = getattr(exc, "code", None)
    data = getattr(exc, "data", None)
    status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None)
    if code:
        message = data.get("Message") if isinstance(data, Mapping) and data.get("Message") else None
        text = sanitise(str(message or getattr(exc, "message", "") or code), secrets)
        retryable = (isinstance(status, int) and status >= 500) or str(code).startswith(RETRYABLE_CODES)
        return RosError(str(code), text, retryable=retryable, status=status if isinstance(status, int) else None)
    # No answer from ROS: connection refused, reset, timed out. The call may or may not have been carried out.
    return RosError(type(exc).__name__, sanitise(str(exc) or type(exc).__name__, secrets), retryable=True)


@dataclass(frozen=True)
class StackInfo:
    """What GetStack says about a stack."""

    stack_id: str
    stack_name: str
    region_id: str
    status: str
    status_reason: str
    progress: float | None
    outputs: list[dict[str, Any]]

    @property
    def final(self) -> bool:
        """Whether the stack stopped changing (any status but ``*_IN_PROGRESS``)."""
        return bool(self.status) and not self.status.endswith(IN_PROGRESS_SUFFIX)


class RosClient:
    """ROS in one region, with one set of credentials."""

    def __init__(self, credentials: RosCredentials, region_id: str, endpoint: str = "") -> None:
        host, protocol = split_endpoint(endpoint)
        self.region_id = region_id
        self._secrets = credentials.secrets()
        self._client = Client(Config(
            access_key_id=credentials.access_key_id, access_key_secret=credentials.access_key_secret,
            security_token=credentials.security_token or None, region_id=region_id, endpoint=host,
            protocol=protocol, connect_timeout=CONNECT_TIMEOUT_MS, read_timeout=READ_TIMEOUT_MS))

    async def _call(self, method: str, request: Any) -> dict[str, Any]:
        try:
            response = await getattr(self._client, method)(request)
        except Exception as exc:  # noqa: BLE001 - every SDK or network failure becomes a RosError
            raise _error(exc, self._secrets) from None
        body = response.body.to_map() if response.body is not None else {}
        return body if isinstance(body, dict) else {}

    async def create_stack(self, *, stack_name: str, template_body: str, parameters: Mapping[str, Any],
                           client_token: str, timeout_minutes: int) -> str:
        """CreateStack; the stack's id. The same ``client_token`` again answers with the same stack (idempotent)."""
        request = ros_models.CreateStackRequest(
            region_id=self.region_id, stack_name=stack_name, template_body=template_body, client_token=client_token,
            timeout_in_minutes=timeout_minutes,
            parameters=[ros_models.CreateStackRequestParameters(parameter_key=str(k), parameter_value=str(v))
                        for k, v in parameters.items()] or None)
        body = await self._call("create_stack_async", request)
        stack_id = body.get("StackId")
        if not isinstance(stack_id, str) or not stack_id:
            raise RosError("InvalidResponse", "CreateStack answered without a StackId.")
        return stack_id

    async def continue_create_stack(self, stack_id: str) -> None:
        """ContinueCreateStack: ROS goes on creating a ``CREATE_FAILED`` stack from the resources that failed (GetStack
        then says ``CREATE_IN_PROGRESS`` until the stack's final status)."""
        await self._call("continue_create_stack_async", ros_models.ContinueCreateStackRequest(
            region_id=self.region_id, stack_id=stack_id))

    async def get_stack(self, stack_id: str) -> StackInfo:
        """GetStack with its progress percentage."""
        body = await self._call("get_stack_async", ros_models.GetStackRequest(
            region_id=self.region_id, stack_id=stack_id, show_resource_progress="PercentageOnly"))
        progress = body.get("ResourceProgress") if isinstance(body.get("ResourceProgress"), dict) else {}
        percent = progress.get("StackOperationProgress")
        outputs = [dict(o) for o in body.get("Outputs") or [] if isinstance(o, dict)]
        return StackInfo(stack_id=str(body.get("StackId") or stack_id), stack_name=str(body.get("StackName") or ""),
                         region_id=str(body.get("RegionId") or self.region_id), status=str(body.get("Status") or ""),
                         status_reason=sanitise(str(body.get("StatusReason") or ""), self._secrets),
                         progress=float(percent) if isinstance(percent, int | float) else None, outputs=outputs)

    async def stack_resources(self, stack_id: str) -> list[dict[str, Any]]:
        """ListStackResources: each resource's logical id, type, status (and physical id, status reason)."""
        body = await self._call("list_stack_resources_async", ros_models.ListStackResourcesRequest(
            region_id=self.region_id, stack_id=stack_id))
        resources = []
        for item in body.get("Resources") or []:
            if not isinstance(item, dict):
                continue
            resource = {"logicalResourceId": str(item.get("LogicalResourceId") or ""),
                        "resourceType": str(item.get("ResourceType") or ""), "status": str(item.get("Status") or "")}
            if item.get("PhysicalResourceId"):
                resource["physicalResourceId"] = str(item["PhysicalResourceId"])
            if item.get("StatusReason"):
                resource["statusReason"] = sanitise(str(item["StatusReason"]), self._secrets, 200)
            resources.append(resource)
        return resources

    async def find_stacks(self, stack_name: str) -> list[dict[str, str]]:
        """ListStacks by name: ``{"stackId", "status", "createTime"}`` of each stack called ``stack_name``."""
        body = await self._call("list_stacks_async", ros_models.ListStacksRequest(
            region_id=self.region_id, stack_name=[stack_name], page_size=50))
        return [{"stackId": str(s.get("StackId") or ""), "status": str(s.get("Status") or ""),
                 "createTime": str(s.get("CreateTime") or "")}
                for s in body.get("Stacks") or [] if isinstance(s, dict) and s.get("StackName") == stack_name]

    async def delete_stack(self, stack_id: str) -> None:
        """DeleteStack: ROS starts removing the stack and its resources (GetStack then says ``DELETE_IN_PROGRESS``
        until ``DELETE_COMPLETE``, or ``StackNotFound`` once it is gone)."""
        await self._call("delete_stack_async", ros_models.DeleteStackRequest(region_id=self.region_id,
                                                                             stack_id=stack_id))
