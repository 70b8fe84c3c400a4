"""The selector's own configuration keys: where the ECS and VPC OpenAPIs are, the default region, the credentials
and how long a cloud query may take.

Credentials: ``resource-selector-access-key-id`` / ``-access-key-secret`` (and ``-security-token`` for STS) when
written (``${VAR}`` works in the file), else the environment's ``ALIBABA_CLOUD_ACCESS_KEY_ID`` /
``ALIBABA_CLOUD_ACCESS_KEY_SECRET`` / ``ALIBABA_CLOUD_SECURITY_TOKEN``. Without credentials the selector lists
nothing and checks an answer's value against the selector's pattern only (no network call).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

DEFAULT_REGION = "cn-hangzhou"
DEFAULT_TIMEOUT = 10.0
ACCESS_KEY_ID_ENV = "ALIBABA_CLOUD_ACCESS_KEY_ID"
ACCESS_KEY_SECRET_ENV = "ALIBABA_CLOUD_ACCESS_KEY_SECRET"
SECURITY_TOKEN_ENV = "ALIBABA_CLOUD_SECURITY_TOKEN"


class SelectorConfig(BaseModel):
    """The keys the resource selector adds to the configuration (its cloud queries)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    resource_selector_region: str = Field(
        "", description=f"Region listed when the question names no RegionId (default {DEFAULT_REGION}).")
    resource_selector_ecs_endpoint: str = Field(
        "", description="ECS OpenAPI endpoint (host, https://host or http://host:port); empty: the SDK's regional "
                        "endpoint. For private clouds and tests.")
    resource_selector_vpc_endpoint: str = Field(
        "", description="VPC OpenAPI endpoint (host, https://host or http://host:port); empty: the SDK's regional "
                        "endpoint.")
    resource_selector_access_key_id: str = Field(
        "", description=f"AccessKey id for the selector's queries (default: ${ACCESS_KEY_ID_ENV}).")
    resource_selector_access_key_secret: SecretStr = Field(
        SecretStr(""), description=f"AccessKey secret (default: ${ACCESS_KEY_SECRET_ENV}); never shown.")
    resource_selector_security_token: SecretStr = Field(
        SecretStr(""), description=f"STS security token (default: ${SECURITY_TOKEN_ENV}); never shown.")
    resource_selector_query_timeout_seconds: float = Field(
        DEFAULT_TIMEOUT, gt=0, le=120, description="Seconds one listing or check (all its pages) may take.")


@dataclass(frozen=True)
class Credentials:
    """An AccessKey pair (and an STS token when there is one); ``repr`` shows none of them."""

    access_key_id: str = field(repr=False)
    access_key_secret: str = field(repr=False)
    security_token: str = field(default="", repr=False)

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown."""
        return tuple(s for s in (self.access_key_id, self.access_key_secret, self.security_token) if s)


@dataclass(frozen=True)
class QuerySettings:
    """The effective query settings of one server (credentials resolved; ``None``: no queries)."""

    region: str
    ecs_endpoint: str
    vpc_endpoint: str
    credentials: Credentials | None
    timeout: float

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str] | None = None) -> QuerySettings:
        """The settings of ``config`` (defaults for keys it lacks) with the credentials it or ``environ`` has."""
        env = os.environ if environ is None else environ
        return cls(region=str(getattr(config, "resource_selector_region", "") or "").strip() or DEFAULT_REGION,
                   ecs_endpoint=str(getattr(config, "resource_selector_ecs_endpoint", "") or ""),
                   vpc_endpoint=str(getattr(config, "resource_selector_vpc_endpoint", "") or ""),
                   credentials=credentials(config, env),
                   timeout=float(getattr(config, "resource_selector_query_timeout_seconds", DEFAULT_TIMEOUT)))


def _secret(value: Any) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else str(value or "")


def credentials(config: Any, environ: Mapping[str, str]) -> Credentials | None:
    """The configured key pair when both keys are written, else the environment's, else ``None``."""
    key_id = str(getattr(config, "resource_selector_access_key_id", "") or "").strip()
    secret = _secret(getattr(config, "resource_selector_access_key_secret", "")).strip()
    if key_id and secret:
        return Credentials(key_id, secret, _secret(getattr(config, "resource_selector_security_token", "")).strip())
    key_id = (environ.get(ACCESS_KEY_ID_ENV) or "").strip()
    secret = (environ.get(ACCESS_KEY_SECRET_ENV) or "").strip()
    if key_id and secret:
        return Credentials(key_id, secret, (environ.get(SECURITY_TOKEN_ENV) or "").strip())
    return None


def check(config: Any) -> list[str]:
    """Start-up problems of the selector's keys: half a key pair, a token without a pair."""
    key_id = str(getattr(config, "resource_selector_access_key_id", "") or "").strip()
    secret = _secret(getattr(config, "resource_selector_access_key_secret", "")).strip()
    token = _secret(getattr(config, "resource_selector_security_token", "")).strip()
    if bool(key_id) != bool(secret):
        return ["'resource-selector-access-key-id' and 'resource-selector-access-key-secret' go together: "
                "set both or neither."]
    if token and not key_id:
        return ["'resource-selector-security-token' needs 'resource-selector-access-key-id' and "
                "'resource-selector-access-key-secret'."]
    return []
