"""The deploy settings of the selling pipelines: which deployer (``none`` or ``ros``), where ROS is and with which
credentials, how often a stack is polled and for how long.

Credentials: the ``ros-access-key-id`` / ``ros-access-key-secret`` keys when written (``${VAR}`` works in the
file), else the environment's ``ALIBABA_CLOUD_ACCESS_KEY_ID`` / ``ALIBABA_CLOUD_ACCESS_KEY_SECRET`` (and
``ALIBABA_CLOUD_SECURITY_TOKEN`` for STS). The secret is a :class:`~pydantic.SecretStr`: ``--check-config`` and
every ``repr`` mask it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from iac_code.api import without_effect
from iac_code_pipeline_selling.ros_client import RosCredentials

DEFAULT_REGION = "cn-hangzhou"
ACCESS_KEY_ID_ENV = "ALIBABA_CLOUD_ACCESS_KEY_ID"
ACCESS_KEY_SECRET_ENV = "ALIBABA_CLOUD_ACCESS_KEY_SECRET"
SECURITY_TOKEN_ENV = "ALIBABA_CLOUD_SECURITY_TOKEN"
ROS_KEYS = ("ros_endpoint", "ros_region", "ros_access_key_id", "ros_access_key_secret", "ros_poll_interval_seconds",
            "ros_wait_timeout_seconds", "ros_stack_timeout_minutes")


class DeployConfig(BaseModel):
    """The keys the selling pipelines add for their ``deploying`` step."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    deployer: Literal["none", "ros"] = Field(
        "none", description="How the chosen template is deployed: none (say where the template is) or ros "
                            "(create the stack through ROS, after the caller's permission).")
    ros_endpoint: str = Field(
        "", description="ROS endpoint (host, https://host or http://host:port); empty: the SDK's regional endpoint.")
    ros_region: str = Field(
        "", description=f"Region of the stack when the request names none (default {DEFAULT_REGION}).")
    ros_access_key_id: str = Field(
        "", description=f"AccessKey id for ROS (default: ${ACCESS_KEY_ID_ENV}).")
    ros_access_key_secret: SecretStr = Field(
        SecretStr(""), description=f"AccessKey secret for ROS (default: ${ACCESS_KEY_SECRET_ENV}); never shown.")
    ros_poll_interval_seconds: float = Field(
        5.0, gt=0, le=300, description="Seconds between two GetStack polls of a stack being created.")
    ros_wait_timeout_seconds: float = Field(
        3600.0, gt=0, le=86400, description="Seconds a deploy waits for its stack's final status at most.")
    ros_stack_timeout_minutes: int = Field(
        60, ge=10, le=1440, description="The stack's own creation timeout (CreateStack TimeoutInMinutes).")


@dataclass(frozen=True)
class RosSettings:
    """The effective ROS settings of one server (credentials resolved)."""

    endpoint: str
    region: str
    credentials: RosCredentials | None
    poll_interval: float
    wait_timeout: float
    stack_timeout_minutes: int

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str] | None = None) -> RosSettings:
        """The settings of ``config`` (its defaults for keys it lacks) with the credentials it or ``environ`` has."""
        env = os.environ if environ is None else environ
        return cls(endpoint=str(getattr(config, "ros_endpoint", "") or ""),
                   region=str(getattr(config, "ros_region", "") or ""),
                   credentials=credentials(config, env),
                   poll_interval=float(getattr(config, "ros_poll_interval_seconds", 5.0)),
                   wait_timeout=float(getattr(config, "ros_wait_timeout_seconds", 3600.0)),
                   stack_timeout_minutes=int(getattr(config, "ros_stack_timeout_minutes", 60)))


def _secret(value: Any) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else str(value or "")


def credentials(config: Any, environ: Mapping[str, str]) -> RosCredentials | None:
    """The configured key pair when both keys are written, else the environment's, else ``None``."""
    key_id = str(getattr(config, "ros_access_key_id", "") or "").strip()
    secret = _secret(getattr(config, "ros_access_key_secret", "")).strip()
    if key_id and secret:
        return RosCredentials(key_id, secret)
    key_id = (environ.get(ACCESS_KEY_ID_ENV) or "").strip()
    secret = (environ.get(ACCESS_KEY_SECRET_ENV) or "").strip()
    if key_id and secret:
        return RosCredentials(key_id, secret, (environ.get(SECURITY_TOKEN_ENV) or "").strip())
    return None


def check(config: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """Start-up problems of the deploy keys: ROS keys without ``deployer: ros``, half a key pair, ``deployer: ros``
    without credentials."""
    env = os.environ if environ is None else environ
    if getattr(config, "deployer", "none") != "ros":
        return without_effect(config, ROS_KEYS, "deployer: ros")
    key_id = str(getattr(config, "ros_access_key_id", "") or "").strip()
    secret = _secret(getattr(config, "ros_access_key_secret", "")).strip()
    if bool(key_id) != bool(secret):
        return ["'ros-access-key-id' and 'ros-access-key-secret' go together: set both or neither."]
    if credentials(config, env) is None:
        return [f"'deployer: ros' needs Alibaba Cloud credentials: set {ACCESS_KEY_ID_ENV} and {ACCESS_KEY_SECRET_ENV} "
                "in the environment, or 'ros-access-key-id' and 'ros-access-key-secret'."]
    return []
