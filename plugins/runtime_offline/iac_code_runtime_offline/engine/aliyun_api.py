"""Alibaba Cloud ROS API calls through Alibaba Cloud's own Python SDK.

A thin, typed layer over ``alibabacloud_ros20190910``: it picks credentials
(per-request metadata first, then the environment), builds the SDK request
model from ROS API parameter names, runs the SDK's async method and returns a
plain dict.  Failures never raise: they come back as ``{"ok": False, ...}``
with a message scrubbed of secrets, signatures and local paths, because the
result may be shown to a model or a user.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from alibabacloud_ros20190910 import models as ros_models
from alibabacloud_ros20190910.client import Client
from alibabacloud_tea_openapi.utils_models import Config

__all__ = [
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "READ_ONLY_ACTIONS",
    "SUPPORTED_ACTIONS",
    "Credentials",
    "call_ros",
    "credentials_from",
    "is_read_only",
    "metadata_region",
    "resolve_endpoint",
]

SUPPORTED_ACTIONS = ("ValidateTemplate", "PreviewStack", "CreateStack", "UpdateStack", "DeleteStack", "GetStack", "ListStacks")
READ_ONLY_ACTIONS = frozenset({"ValidateTemplate", "PreviewStack", "GetStack", "ListStacks"})
DEFAULT_ENDPOINT = "ros.aliyuncs.com"
ENDPOINT_ENV = "IACCODE_ALIYUN_ROS_ENDPOINT"
NOT_CONFIGURED = "Alibaba Cloud credentials are not configured"

_CONNECT_TIMEOUT_MS = 5_000
_READ_TIMEOUT_MS = 60_000

# action -> (request model class, name of the SDK's async method)
_ACTIONS: dict[str, tuple[type, str]] = {
    "ValidateTemplate": (ros_models.ValidateTemplateRequest, "validate_template_async"),
    "PreviewStack": (ros_models.PreviewStackRequest, "preview_stack_async"),
    "CreateStack": (ros_models.CreateStackRequest, "create_stack_async"),
    "UpdateStack": (ros_models.UpdateStackRequest, "update_stack_async"),
    "DeleteStack": (ros_models.DeleteStackRequest, "delete_stack_async"),
    "GetStack": (ros_models.GetStackRequest, "get_stack_async"),
    "ListStacks": (ros_models.ListStacksRequest, "list_stacks_async"),
}


def is_read_only(action: str) -> bool:
    """True when the action only reads (safe to run without asking for approval)."""
    return action in READ_ONLY_ACTIONS


@dataclass(frozen=True)
class Credentials:
    """An AccessKey pair (optionally STS) and the region the calls go to."""

    access_key_id: str
    access_key_secret: str
    region_id: str = "cn-hangzhou"
    security_token: str | None = None

    def __repr__(self) -> str:  # never print the secret or token, even in tracebacks and logs
        return f"Credentials(access_key_id={self.access_key_id!r}, region_id={self.region_id!r}, secret=***)"


def _pick(source: Mapping[str, Any], key: str) -> str | None:
    """A stripped, non-empty string value from a mapping, else None."""
    value = source.get(key)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _from(source: Mapping[str, Any], prefix: str, upper: bool) -> Credentials | None:
    """Credentials from one source, when both the AccessKey id and secret are present."""

    def key(name: str) -> str:
        return (prefix + name).upper() if upper else prefix + name

    key_id, secret = _pick(source, key("access_key_id")), _pick(source, key("access_key_secret"))
    if not key_id or not secret:
        return None
    return Credentials(
        access_key_id=key_id,
        access_key_secret=secret,
        region_id=_pick(source, key("region_id")) or "cn-hangzhou",
        security_token=_pick(source, key("security_token")),
    )


def metadata_region(metadata: Mapping[str, Any]) -> str | None:
    """The region the request's metadata chooses: beside a complete key pair, or alone (it then overrides the
    server credentials' region); ``None`` when it names none or comes with a lone key id or secret (ignored)."""
    metadata = metadata or {}
    key_id, secret = _pick(metadata, "alibaba_cloud_access_key_id"), _pick(metadata, "alibaba_cloud_access_key_secret")
    if bool(key_id) != bool(secret):
        return None
    return _pick(metadata, "alibaba_cloud_region_id")


def credentials_from(metadata: Mapping[str, Any], environ: Mapping[str, str]) -> Credentials | None:
    """Per-request metadata credentials (a complete key pair) win over the environment's; None when neither is.

    A region given alone in the metadata overrides only the region of the environment's credentials
    (nothing when there are none); a lone key id or secret leaves all metadata credentials aside.
    The kernel has checked a lone region's form (``Unsupported Alibaba Cloud region ID.``).
    """
    own = _from(metadata or {}, "alibaba_cloud_", upper=False)
    if own is not None:
        return own
    server = _from(environ or {}, "alibaba_cloud_", upper=True)
    region = metadata_region(metadata)
    if server is None or region is None:
        return server
    return replace(server, region_id=region)


def resolve_endpoint(endpoint: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint to talk to: explicit argument, else $IACCODE_ALIYUN_ROS_ENDPOINT, else the public one."""
    env = os.environ if environ is None else environ
    return (endpoint or "").strip() or (env.get(ENDPOINT_ENV) or "").strip() or DEFAULT_ENDPOINT


def _client(credentials: Credentials, endpoint: str) -> Client:
    """An SDK client; stand-in endpoints (anything but the public one) are spoken to over plain http."""
    host, protocol = endpoint, "https"
    for scheme in ("http://", "https://"):
        if endpoint.startswith(scheme):
            host, protocol = endpoint[len(scheme) :].rstrip("/"), scheme[:-3]
    if endpoint != DEFAULT_ENDPOINT and "://" not in endpoint:
        protocol = "http"
    config = Config(
        access_key_id=credentials.access_key_id,
        access_key_secret=credentials.access_key_secret,
        security_token=credentials.security_token,
        region_id=credentials.region_id,
        endpoint=host,
        protocol=protocol,
        connect_timeout=_CONNECT_TIMEOUT_MS,
        read_timeout=_READ_TIMEOUT_MS,
    )
    return Client(config)


def _request(action: str, params: Mapping[str, Any], credentials: Credentials) -> Any:
    """The SDK request model for an action, from ROS API parameter names (RegionId defaults to the credentials')."""
    data = dict(params)
    data.setdefault("RegionId", credentials.region_id)
    body = data.get("TemplateBody")
    if isinstance(body, Mapping):
        data["TemplateBody"] = json.dumps(body, ensure_ascii=False)
    if isinstance(data.get("Parameters"), Mapping):
        data["Parameters"] = [{"ParameterKey": k, "ParameterValue": str(v)} for k, v in data["Parameters"].items()]
    # The SDK stringifies query values with str(); ROS expects JSON-style booleans.
    data = {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in data.items()}
    model_cls, _ = _ACTIONS[action]
    return model_cls().from_map(data)


_PATH = re.compile(r"(?<![\w:/.])(?:/[\w.@+-]+){2,}/?|[A-Za-z]:\\[^\s'\"]+")
_QUERY = re.compile(r"(https?://[^\s?'\"]+)\?[^\s'\"]*")
_SIGNED = re.compile(
    r"(Signature|AccessKeySecret|SecurityToken|access_key_secret|security_token)([=:]\s*['\"]?)[^\s&'\",}]+", re.I
)


def sanitise(message: str, credentials: Credentials | None = None) -> str:
    """Strip secrets, signatures, request query strings and local file paths from an error message."""
    text = message
    if credentials is not None:
        for secret in (credentials.access_key_secret, credentials.security_token):
            if secret:
                text = text.replace(secret, "***")
    text = _QUERY.sub(r"\1?<query omitted>", text)
    text = _SIGNED.sub(r"\1\2***", text)
    text = _PATH.sub("<path>", text)
    return text[:2000]


def _error(exc: BaseException, credentials: Credentials) -> dict[str, Any]:
    """Map an SDK or network exception to the sanitised failure shape."""
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException) and getattr(exc, "code", None) is None:
        exc = inner  # the SDK wraps network failures; the inner exception has the readable message
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    text = str(message if isinstance(message, str) and message else exc) or type(exc).__name__
    result: dict[str, Any] = {"ok": False, "error": sanitise(text, credentials)}
    if code:
        result["code"] = str(code)
    status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None)
    if isinstance(status, int):
        result["status"] = status
    return result


async def call_ros(
    action: str,
    params: Mapping[str, Any],
    credentials: Credentials | None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Call one ROS API action; returns {"ok": True, "action", "result"} or {"ok": False, "error", ["code"]}."""
    if credentials is None:
        return {"ok": False, "error": NOT_CONFIGURED}
    if action not in _ACTIONS:
        return {"ok": False, "error": f"Unsupported ROS action: {action}"}
    try:
        client = _client(credentials, resolve_endpoint(endpoint))
        request = _request(action, params or {}, credentials)
        method: Callable[[Any], Awaitable[Any]] = getattr(client, _ACTIONS[action][1])
        response = await method(request)
    except Exception as exc:  # noqa: BLE001 - every SDK/network failure becomes a result, never an exception
        return _error(exc, credentials)
    body = response.body.to_map() if getattr(response, "body", None) is not None else {}
    return {"ok": True, "action": action, "result": body}
