"""The push configuration keys (``push-*``), their validation, and the checks that need the whole configuration."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Iterable
from typing import Any

from a2a.types.a2a_pb2 import TaskState
from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code import api

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# A DNS host name (labels of letters, digits, '-' and '_'), already lower-cased.
_HOST_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*")

# What to say when the selected queue's plugin is not installed (the redis text is the product's).
MISSING_QUEUE = {
    "local-file": "push-queue 'local-file' is not installed. Install iac-code[a2a].",
    "redis-streams": "Redis-backed A2A push delivery requires optional dependencies. Install iac-code[a2a-redis].",
}
UNKNOWN_QUEUE = "push-queue must be local-file or redis-streams."


# The push-events vocabulary: which task states each event group pushes.
TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
                      TaskState.TASK_STATE_REJECTED})
EVENT_GROUPS: dict[str, frozenset[int]] = {
    "terminal": TERMINAL,
    "input-required": frozenset({TaskState.TASK_STATE_INPUT_REQUIRED}),
    "auth-required": frozenset({TaskState.TASK_STATE_AUTH_REQUIRED}),
    "submitted": frozenset({TaskState.TASK_STATE_SUBMITTED}),
    "working": frozenset({TaskState.TASK_STATE_WORKING}),
    "completed": frozenset({TaskState.TASK_STATE_COMPLETED}),
    "failed": frozenset({TaskState.TASK_STATE_FAILED}),
    "canceled": frozenset({TaskState.TASK_STATE_CANCELED}),
    "rejected": frozenset({TaskState.TASK_STATE_REJECTED}),
}
DEFAULT_EVENTS = ("terminal", "input-required")


def parse_push_events(value: Iterable[str] | str) -> tuple[frozenset[int], bool]:
    """``push-events`` → (task states that are pushed, whether every update is: ``all``)."""
    names = [v.strip().lower().replace("_", "-") for v in (value.split(",") if isinstance(value, str) else value)]
    names = [n.removeprefix("task-state-") for n in names if n]
    if not names:
        raise ValueError("push-events: name at least one event group, or 'all'")
    if "all" in names:
        return frozenset(), True
    states: set[int] = set()
    for name in names:
        if name not in EVENT_GROUPS:
            raise ValueError(f"push-events: unknown event {name!r} (use all, {', '.join(EVENT_GROUPS)})")
        states |= EVENT_GROUPS[name]
    return frozenset(states), False


def split_push_allowed_hosts(entries: Iterable[str]) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """``push-allowed-hosts`` entries → (host names, networks); an IP address is a one-address network.

    Raises ``ValueError`` naming the key and the entry for anything else.
    """
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        text = entry.strip().lower()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]  # a bracketed IPv6 literal, as written in URLs
        if "/" in text and "://" not in text:
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise ValueError(f"push-allowed-hosts: {entry!r} is not a valid CIDR network") from None
            continue
        try:
            networks.append(ipaddress.ip_network(text))
            continue
        except ValueError:
            pass
        name = text.rstrip(".")
        if not _HOST_NAME.fullmatch(name):
            raise ValueError(f"push-allowed-hosts: {entry!r} is not a host name, IP address or CIDR network")
        names.add(name)
    return frozenset(names), tuple(networks)


class PushConfig(BaseModel):
    """The keys push notifications add to the configuration (spec: push.md)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    push_notifications: bool = Field(False, description="Enable the push-notification config API and delivery.")
    push_queue: str = Field("local-file", description="Push delivery queue plugin: local-file or redis-streams.")
    push_events: Any = Field(
        ["terminal", "input-required"],
        description="Task events pushed: all, or a list of terminal, input-required, auth-required, submitted, "
        "working, completed, failed, canceled, rejected.")
    push_delivery: str = Field(
        "server", description="server: this process delivers queued pushes; external: only "
        "'iac-code a2a push-worker' processes do.")
    push_timeout: float = Field(5.0, gt=0, description="Seconds one push delivery attempt may take.")
    push_max_attempts: int = Field(5, ge=1, description="Delivery attempts before a push is dead-lettered.")
    push_retry_base_delay: float = Field(
        1.0, gt=0, description="Seconds before the first retry; doubles per attempt (±20 % jitter).")
    push_retry_max_delay: float = Field(60.0, gt=0, description="Longest wait between two delivery attempts.")
    push_concurrency: int = Field(64, ge=1, description="Push deliveries one worker runs at once.")
    push_lease_timeout_ms: int = Field(
        300_000, ge=100, description="Milliseconds a claimed push job stays leased before another worker may take it.")
    push_signing: bool = Field(
        False, description="Sign each push with a JWT (X-A2A-Notification-Signature); keys at /.well-known/jwks.json.")
    push_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Push-notification hosts exempt from the private/loopback/link-local URL screen: host names, "
        "IP addresses or CIDR networks (matched against the URL's host as written; never resolved for the check).")

    @field_validator("push_events")
    @classmethod
    def _check_push_events(cls, value: Any) -> Any:
        if not isinstance(value, str | list):
            raise ValueError("push-events: a list of event names, or 'all'")
        parse_push_events(value)
        return value

    @field_validator("push_queue", "push_delivery")
    @classmethod
    def _normalise_name(cls, value: str) -> str:
        return value.strip().lower().replace("_", "-")

    @field_validator("push_delivery")
    @classmethod
    def _check_push_delivery(cls, value: str) -> str:
        if value not in ("server", "external"):
            raise ValueError("push-delivery: must be server or external")
        return value

    @field_validator("push_allowed_hosts")
    @classmethod
    def _check_push_allowed_hosts(cls, value: list[str]) -> list[str]:
        split_push_allowed_hosts(value)
        return value


def check(config: Any, queues: Collection[str]) -> list[str]:
    """The push problems of ``config`` with these push queues installed: the selected queue is one of them;
    no ``push-*`` key was written while ``push-notifications`` is off."""
    if not config.push_notifications:
        return api.without_effect(config, [key for key in PushConfig.model_fields if key != "push_notifications"],
                                  "push-notifications: true")
    if config.push_queue not in queues:
        return [MISSING_QUEUE.get(config.push_queue, UNKNOWN_QUEUE)]
    return []
