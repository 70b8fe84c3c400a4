"""HTTP transport: health, Agent Card serving, authentication matrix."""

from __future__ import annotations

import base64
import json

import aiohttp
import pytest
from aiohttp import web

from iac_code.api import HttpRouteSpec, hookimpl
from iac_code.testing import A2A_HEADERS, start_server

GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}


async def test_health_is_open_and_minimal() -> None:
    async with start_server({"token": "secret"}) as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + "health") as r:
            assert r.status == 200
            assert await r.json() == {"status": "healthy"}


async def test_agent_card_fields() -> None:
    async with start_server() as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + ".well-known/agent-card.json") as r:
            assert r.status == 200
            card = await r.json()
    assert card["name"] == "iac-code"
    assert card["supportedInterfaces"][0] == {
        "url": server.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    assert server.url.startswith("http://127.0.0.1:") and not server.url.endswith(":0/")
    caps = card["capabilities"]
    assert caps["streaming"] is True
    assert caps.get("pushNotifications", False) is False
    assert caps["extendedAgentCard"] is True
    # the default install has a pipeline (iac-code-pipeline-selling), so the pipeline-events extension is listed,
    # and execution control (iac-code-execution-control) on this HTTP interface
    assert [e["uri"] for e in caps["extensions"]] == ["urn:iac-code:a2a:artifact-metadata:v1",
                                                      "urn:iac-code:a2a:thinking-exposure:v1",
                                                      "urn:iac-code:a2a:pipeline-events:v1",
                                                      "urn:iac-code:a2a:execution-control:v1"]
    assert caps["extensions"][1]["params"] == {"enabledTypes": ["tool_trace"]}
    assert caps["extensions"][2]["params"]["enabled"] is False and caps["extensions"][2]["params"]["mode"] == "normal"
    for mode in ("text/plain", "application/json", "text/yaml", "image/png", "audio/mpeg",
                 "application/octet-stream"):
        assert mode in card["defaultInputModes"]
    assert card["defaultOutputModes"] == ["text/plain"]
    assert [s["id"] for s in card["skills"]] == [
        "iac_generation", "iac_review", "aliyun_ros_operations", "terraform_ros_conversion"]
    assert "securitySchemes" not in card
    assert "trusted local environments" in card["description"]


async def test_card_push_capability_follows_config() -> None:
    async with start_server({"push-notifications": True}) as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + ".well-known/agent-card.json") as r:
            assert (await r.json())["capabilities"]["pushNotifications"] is True


async def test_card_cache_headers_and_304() -> None:
    async with start_server() as server, aiohttp.ClientSession() as s:
        url = server.url + ".well-known/agent-card.json"
        async with s.get(url) as r:
            etag = r.headers["ETag"]
            assert r.headers["Cache-Control"] == "public, max-age=60"
            assert r.headers["Last-Modified"].endswith("GMT")
            assert etag.startswith('"sha256-')
        async with s.get(url, headers={"If-None-Match": etag}) as r:
            assert r.status == 304
            assert await r.read() == b""
            assert r.headers["ETag"] == etag
        async with s.get(url, headers={"If-None-Match": '"sha256-other"'}) as r:
            assert r.status == 200


async def test_card_advertises_configured_security_schemes() -> None:
    settings = {"token": "t", "basic-username": "u", "basic-password": "p", "api-key": "k",
                "api-key-header": "X-Custom-Key"}
    async with start_server(settings) as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + ".well-known/agent-card.json", headers={"Authorization": "Bearer t"}) as r:
            card = await r.json()
    # Each scheme in its 1.0 shape (the default strict card; card-legacy-fields adds the 0.3 fields beside them).
    assert card["securitySchemes"] == {
        "bearerAuth": {"httpAuthSecurityScheme": {"scheme": "bearer"}},
        "basicAuth": {"httpAuthSecurityScheme": {"scheme": "basic"}},
        "apiKeyAuth": {"apiKeySecurityScheme": {"location": "header", "name": "X-Custom-Key"}},
    }
    assert len(card["securityRequirements"]) == 3
    assert "trusted local environments" not in card["description"]


class _RoutePlugin:
    @hookimpl
    def iac_code_http_routes(self, kernel: object) -> list[HttpRouteSpec]:
        async def echo(request: web.Request) -> web.Response:
            return web.json_response({"plugin": "ok"})

        async def open_ping(request: web.Request) -> web.Response:
            return web.json_response({"pong": True})

        return [HttpRouteSpec("GET", "/plugin/echo", echo),
                HttpRouteSpec("GET", "/plugin/ping", open_ping, auth=False)]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


SCHEMES = {
    "bearer": ({"token": "tok-123"}, {"Authorization": "Bearer tok-123"}, {"Authorization": "Bearer nope"}),
    "basic": ({"basic-username": "alice", "basic-password": "pw"}, {"Authorization": _basic("alice", "pw")},
              {"Authorization": _basic("alice", "wrong")}),
    "api-key": ({"api-key": "key-1"}, {"X-API-Key": "key-1"}, {"X-API-Key": "key-2"}),
    "api-key-custom-header": ({"api-key": "key-1", "api-key-header": "X-Team-Key"}, {"x-team-key": "key-1"},
                              {"X-API-Key": "key-1"}),
}
ROUTES = [("GET", ".well-known/agent-card.json", None), ("POST", "", GET_TASK), ("GET", "plugin/echo", None),
          ("GET", "no/such/route", None)]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
async def test_auth_matrix(scheme: str) -> None:
    settings, good, bad = SCHEMES[scheme]
    async with start_server(settings, extra_plugins={"route-plugin": _RoutePlugin()}) as server, \
            aiohttp.ClientSession() as s:
        for method, path, body in ROUTES:
            for label, headers in (("right", good), ("wrong", bad), ("missing", {})):
                async with s.request(method, server.url + path, json=body,
                                     headers={**headers, "A2A-Version": "1.0"}) as r:
                    if label == "right":
                        expected = 404 if path.startswith("no/") else 200
                        assert r.status == expected, (scheme, path, label)
                    else:
                        assert r.status == 401, (scheme, path, label)
                        assert await r.json() == {"error": "Unauthorized"}
        async with s.get(server.url + "health") as r:
            assert r.status == 200
        async with s.get(server.url + "plugin/ping") as r:
            assert r.status == 200 and await r.json() == {"pong": True}


async def test_any_configured_scheme_satisfies() -> None:
    settings = {"token": "t", "basic-username": "u", "basic-password": "p", "api-key": "k"}
    async with start_server(settings) as server, aiohttp.ClientSession() as s:
        for headers in ({"Authorization": "Bearer t"}, {"Authorization": _basic("u", "p")}, {"X-API-Key": "k"}):
            async with s.get(server.url + ".well-known/agent-card.json", headers=headers) as r:
                assert r.status == 200, headers
        for headers in ({"Authorization": "Bearert"}, {"Authorization": "Token t"}, {"Authorization": "Basic !!!"},
                        {"Authorization": _basic("u", "")}, {"Authorization": "Bearer tt"}):
            async with s.get(server.url + ".well-known/agent-card.json", headers=headers) as r:
                assert r.status == 401, headers


async def test_basic_needs_both_user_and_password() -> None:
    async with start_server({"basic-username": "only-user"}) as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + ".well-known/agent-card.json") as r:
            assert r.status == 200
            assert "securitySchemes" not in await r.json()


async def test_auth_from_environment() -> None:
    environ = {"IACCODE_A2A_HTTP_TOKEN": "env-token", "IACCODE_A2A_API_KEY": "env-key",
               "IACCODE_A2A_API_KEY_HEADER": "X-Env-Key", "IACCODE_A2A_BASIC_USERNAME": "bob",
               "IACCODE_A2A_BASIC_PASSWORD": "pw"}
    async with start_server(environ=environ) as server, aiohttp.ClientSession() as s:
        url = server.url + ".well-known/agent-card.json"
        for headers in ({"Authorization": "Bearer env-token"}, {"X-Env-Key": "env-key"},
                        {"Authorization": _basic("bob", "pw")}):
            async with s.get(url, headers=headers) as r:
                assert r.status == 200, headers
        async with s.get(url, headers={"X-API-Key": "env-key"}) as r:
            assert r.status == 401


async def test_yaml_auth_wins_over_environment() -> None:
    async with start_server({"token": "yaml-token"}, environ={"IACCODE_A2A_HTTP_TOKEN": "env-token"}) as server, \
            aiohttp.ClientSession() as s:
        url = server.url + ".well-known/agent-card.json"
        async with s.get(url, headers={"Authorization": "Bearer yaml-token"}) as r:
            assert r.status == 200
        async with s.get(url, headers={"Authorization": "Bearer env-token"}) as r:
            assert r.status == 401


async def test_unknown_route_and_wrong_method_are_json_errors() -> None:
    async with start_server() as server, aiohttp.ClientSession() as s:
        async with s.get(server.url + "nothing-here") as r:
            assert r.status == 404
            assert json.loads(await r.text()) == {"error": "Not Found"}
        async with s.get(server.url) as r:
            assert r.status == 405
            assert "error" in await r.json()


async def test_sse_and_unary_content_types() -> None:
    async with start_server() as server, aiohttp.ClientSession() as s:
        async with s.post(server.url, json=GET_TASK, headers=A2A_HEADERS) as r:
            assert r.headers["Content-Type"].startswith("application/json")
