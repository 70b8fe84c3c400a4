"""Push-notification delivery: a2a-sdk's sender, our wire JSON, and the push-URL policy.

:class:`KernelPushSender` is a2a-sdk's ``BasePushNotificationSender`` unchanged
except for the payload's serialisation: the SDK posts
``json=MessageToDict(to_stream_response(event))``; the sender's own HTTP client
turns that dict's integral floats back into integers (the rule of
:func:`iac_code.jsonio.message_to_json`) and sends our JSON bytes, so a push
payload reads exactly like the same event on a stream.

:class:`PushUrlPolicy` is a2a-sdk's URL screen
(:func:`a2a.utils.push_url_validator.validate_push_notification_url`) with the
``push-allowed-hosts`` entries exempt; the kernel uses it when a config is
stored and again when a notification is sent.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.utils.push_url_validator import validate_push_notification_url

from iac_code import jsonio
from iac_code.config import split_push_allowed_hosts
from iac_code.turns import acknowledges

DEFAULT_TIMEOUT = 5.0


class _WireJsonClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose ``post(json=...)`` sends the payload as wire JSON."""

    async def post(self, url: Any, **kwargs: Any) -> httpx.Response:
        payload = kwargs.pop("json", None)
        if payload is not None:
            kwargs["content"] = jsonio.dumps(jsonio.integral_floats_to_int(payload))
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Content-Type": "application/json"}
        return await super().post(url, **kwargs)


class KernelPushSender(BasePushNotificationSender):
    """a2a-sdk's push sender with wire-JSON payloads; it owns its HTTP client (close with :meth:`aclose`).

    ``settle`` is awaited before a notification that acknowledges state (a task's
    creation, INPUT_REQUIRED, a terminal state) goes out, so a webhook never hears
    of a state a crash could take back.
    """

    def __init__(self, config_store: PushNotificationConfigStore, *,
                 push_url_validator: Callable[[str], Awaitable[bool]] | None,
                 timeout: float = DEFAULT_TIMEOUT, settle: Callable[[], Awaitable[None]] | None = None) -> None:
        self.client = _WireJsonClient(timeout=timeout)
        self._settle = settle
        super().__init__(self.client, config_store, push_url_validator=push_url_validator)

    async def send_notification(self, task_id: str, event: Any) -> None:
        if not await self._config_store.get_info_for_dispatch(task_id):
            return
        if self._settle is not None and acknowledges(event):
            await self._settle()
        await super().send_notification(task_id, event)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()


class PushUrlPolicy:
    """a2a-sdk's push-URL screen, except for the configured hosts and networks.

    An ``http``/``https`` URL whose host is a listed name, or an IP address inside
    a listed network, is accepted without a DNS look-up; every other URL goes
    through a2a-sdk's screen (no private, loopback or link-local destinations).
    """

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.names, self.networks = split_push_allowed_hosts(allowed_hosts)

    def is_listed(self, host: str) -> bool:
        """Whether ``host`` (as ``urllib`` parses it: lower case, no brackets) is exempt."""
        host = host.rstrip(".")
        if host in self.names:
            return True
        try:
            address = ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        return any(address in network or (mapped is not None and mapped in network) for network in self.networks)

    def exempts(self, url: str) -> bool:
        """Whether ``url`` is an ``http(s)`` URL, with a valid port, to a listed host."""
        if not (self.names or self.networks):
            return False
        try:
            parsed = urllib.parse.urlsplit(url)
            if parsed.port is not None and not 0 < parsed.port:
                return False
        except ValueError:  # an invalid port or IPv6 literal
            return False
        return parsed.scheme in ("http", "https") and bool(parsed.hostname) and self.is_listed(parsed.hostname or "")

    async def __call__(self, url: str) -> bool:
        """``True`` to accept ``url`` as a push-notification destination."""
        if self.exempts(url):
            return True
        return await validate_push_notification_url(url)
