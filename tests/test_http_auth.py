"""A refused HTTP request says how to authenticate; ``card-public`` opens the Agent Card alone.

Every 401 of the HTTP transport (JSON-RPC, REST, card, extended card, metrics,
WebSocket handshake, artifacts) carries one ``WWW-Authenticate`` challenge per
configured scheme (RFC 9110 §11.6.1). Real servers, plain HTTP and a2a-sdk's card
resolver.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
import pytest
from a2a.client import A2ACardResolver

from iac_code.testing import A2A_HEADERS, start_server

BEARER = 'Bearer realm="iac-code"'
BASIC = 'Basic realm="iac-code"'
API_KEY = 'ApiKey realm="iac-code", header="X-Client-Key"'
SCHEMES = [
    ({"token": "t0ken"}, [BEARER]),
    ({"basic-username": "ann", "basic-password": "pw"}, [BASIC]),
    ({"api-key": "k3y", "api-key-header": "X-Client-Key"}, [API_KEY]),
    ({"token": "t0ken", "basic-username": "ann", "basic-password": "pw", "api-key": "k3y",
      "api-key-header": "X-Client-Key"}, [BEARER, BASIC, API_KEY]),
]
GET_ROUTES = [".well-known/agent-card.json", "extendedAgentCard", "tasks", "tasks/some-task", "metrics",
              "a2a", "iac-code/artifacts/0123456789abcdef0123456789abcdef/template.ros.yaml"]
RPC = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}


@pytest.mark.parametrize(("settings", "challenges"), SCHEMES, ids=["bearer", "basic", "api-key", "all"])
async def test_every_refusal_names_each_configured_scheme(settings: dict[str, Any], challenges: list[str]) -> None:
    async with start_server({**settings, "transport": ["http", "websocket"]}) as server, \
            aiohttp.ClientSession() as http:
        async with http.post(server.url, json=RPC, headers=A2A_HEADERS) as r:
            assert r.status == 401 and await r.json() == {"error": "Unauthorized"}
            assert r.headers.getall("WWW-Authenticate") == challenges
        for route in GET_ROUTES:
            async with http.get(server.url + route, headers=A2A_HEADERS) as r:
                assert r.status == 401, route
                assert r.headers.getall("WWW-Authenticate") == challenges, route
        wrong = {**A2A_HEADERS, "Authorization": "Bearer wrong", "X-Client-Key": "wrong"}
        async with http.post(server.url, json=RPC, headers=wrong) as r:
            assert r.status == 401 and r.headers.getall("WWW-Authenticate") == challenges


async def test_without_auth_nothing_is_challenged() -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/agent-card.json") as r:
            assert r.status == 200 and "WWW-Authenticate" not in r.headers


async def test_the_card_is_protected_by_default() -> None:
    async with start_server({"token": "t0ken"}) as server, httpx.AsyncClient() as http:
        r = await http.get(server.url + ".well-known/agent-card.json")
        assert r.status_code == 401 and r.headers.get_list("WWW-Authenticate") == [BEARER]


async def test_card_public_serves_the_card_alone_without_credentials() -> None:
    settings = {"token": "t0ken", "api-key": "k3y", "card-public": True}
    async with start_server(settings) as server, httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, server.url).get_agent_card()  # as a client discovers an agent
        assert set(card.security_schemes) == {"bearerAuth", "apiKeyAuth"}
        r = await http.post(server.url, json=RPC, headers=A2A_HEADERS)
        assert r.status_code == 401
        assert r.headers.get_list("WWW-Authenticate") == [BEARER, 'ApiKey realm="iac-code", header="X-API-Key"']
        for route in ("extendedAgentCard", "tasks", "metrics"):
            assert (await http.get(server.url + route, headers=A2A_HEADERS)).status_code == 401, route
        r = await http.post(server.url, json=RPC, headers={**A2A_HEADERS, "Authorization": "Bearer t0ken"})
        assert r.json()["result"]["name"] == "iac-code"
