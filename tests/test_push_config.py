"""Push-notification config methods follow the push-notifications setting and the push plugin's presence."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from iac_code.base.errors import ConfigProblems
from iac_code.testing import A2A_HEADERS, RunningServer, make_kernel, send_message_body, start_server

# A public literal address: it passes the URL screening without DNS. No test sends
# an event after creating a config, so nothing is ever delivered to it.
PUBLIC_HOOK = "https://8.8.8.8/a2a-hook"


async def rpc(http: aiohttp.ClientSession, server: RunningServer, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


async def test_push_config_crud_when_enabled() -> None:
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as http:
        body = send_message_body("hello")
        async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        created = await rpc(http, server, "CreateTaskPushNotificationConfig",
                            {"taskId": task_id, "id": "hook-1", "url": PUBLIC_HOOK, "token": "t-1"})
        assert created["result"]["id"] == "hook-1" and created["result"]["url"] == PUBLIC_HOOK
        got = await rpc(http, server, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-1"})
        assert got["result"]["url"] == PUBLIC_HOOK
        listed = await rpc(http, server, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert [c["id"] for c in listed["result"]["configs"]] == ["hook-1"]
        for url in ("http://127.0.0.1:9/x", "http://localhost/x", "http://10.0.0.5/x", "ftp://8.8.8.8/x",
                    "http://169.254.169.254/latest", "http://100.100.100.200/latest/meta-data/",
                    "http://metadata.google.internal/", "http://[64:ff9b::a9fe:a9fe]/"):
            refused = await rpc(http, server, "CreateTaskPushNotificationConfig",
                                {"taskId": task_id, "id": "bad", "url": url})
            assert refused["error"]["code"] == -32602, url
        deleted = await rpc(http, server, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-1"})
        assert "error" not in deleted
        listed = await rpc(http, server, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"].get("configs", []) == []


async def test_push_config_refused_when_disabled() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        reply = await rpc(http, server, "CreateTaskPushNotificationConfig",
                          {"taskId": "t", "id": "hook-1", "url": PUBLIC_HOOK})
        assert reply["error"]["code"] == -32003


async def test_without_the_push_plugin_the_server_has_no_push_notifications() -> None:
    """``disabled-plugins: [push]`` (as if iac-code-push were not installed): the server starts, the card offers
    no push notifications, every push-config method answers a2a-sdk's push-not-supported error (-32003)."""
    async with start_server({"disabled-plugins": ["push"]}) as server, aiohttp.ClientSession() as http:
        assert {i.name: i.status for i in server.plugins.infos()}["push"] == "blocked"
        assert server.kernel.push is None
        async with http.get(server.url + ".well-known/agent-card.json") as r:
            card = await r.json()
        assert card["capabilities"].get("pushNotifications", False) is False
        async with http.post(server.url, json=send_message_body("hello"), headers=A2A_HEADERS) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        for method, params in [
            ("CreateTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-1", "url": PUBLIC_HOOK}),
            ("CreateTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-2", "url": "http://127.0.0.1:9/x"}),
            ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-1"}),
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
            ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "hook-1"}),
        ]:
            reply = await rpc(http, server, method, params)
            assert reply["error"]["code"] == -32003, (method, reply)
        unknown = await rpc(http, server, "ListTaskPushNotificationConfigs", {"taskId": "no-such-task"})
        assert unknown["error"]["code"] == -32001
    # Installed but off, by contrast, the callback URL is screened first (spec: push.md §1.1).
    async with start_server() as server, aiohttp.ClientSession() as http:
        reply = await rpc(http, server, "CreateTaskPushNotificationConfig",
                          {"taskId": "t", "id": "hook-1", "url": "http://127.0.0.1:9/x"})
        assert reply["error"]["code"] == -32602


def test_without_the_push_plugin_its_keys_are_unknown() -> None:
    with pytest.raises(ConfigProblems, match="unknown configuration key 'push-notifications'"):
        make_kernel({"disabled-plugins": ["push"], "push-notifications": True})
