"""Signed Agent Cards: what our server signs verifies with a2a-sdk's own verifier, public and extended alike."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import ParseDict
from iac_code_a2a_client.card_verify import CardVerifier
from jwt import PyJWK

from iac_code.testing import A2A_HEADERS, start_server

IAC_CODE = str(Path(sys.executable).with_name("iac-code"))
CARD = ".well-known/agent-card.json"


def as_card(document: dict[str, Any]) -> AgentCard:
    return ParseDict(document, AgentCard(), ignore_unknown_fields=True)


def protected_header(document: dict[str, Any]) -> dict[str, Any]:
    protected = document["signatures"][0]["protected"]
    return dict(json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4))))


def sdk_verify(document: dict[str, Any], key: Any, algorithms: list[str]) -> None:
    """a2a-sdk's verifier; raises when no signature verifies."""
    create_signature_verifier(lambda kid, jku: key, algorithms)(as_card(document))


async def fetch(http: aiohttp.ClientSession, url: str) -> tuple[dict[str, Any], str]:
    async with http.get(url) as r:
        assert r.status == 200
        return await r.json(), r.headers["ETag"]


async def extended(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    async with http.post(url, json=body, headers=A2A_HEADERS) as r:
        return dict((await r.json())["result"])


async def test_hs256_cards_verify_with_a2a_sdk_and_the_extended_card_has_its_own_signature() -> None:
    async with start_server() as plain, aiohttp.ClientSession() as http:
        _, unsigned_etag = await fetch(http, plain.url + CARD)
    async with start_server({"signing-secret": "card-secret"}) as server, aiohttp.ClientSession() as http:
        card, etag = await fetch(http, server.url + CARD)
        assert protected_header(card) == {"alg": "HS256", "jku": None, "kid": "default", "typ": "JOSE"}
        sdk_verify(card, "card-secret", ["HS256"])
        assert etag != unsigned_etag  # the signature is part of the served document
        with pytest.raises(InvalidSignaturesError):
            sdk_verify(card, "another-secret", ["HS256"])
        tampered = {**card, "description": card["description"] + " (changed)"}
        with pytest.raises(InvalidSignaturesError):
            sdk_verify(tampered, "card-secret", ["HS256"])
        ext = await extended(http, server.url)
        assert any(skill["id"] == "iac_code_runtime_details" for skill in ext["skills"])
        assert ext["signatures"] != card["signatures"]
        sdk_verify(ext, "card-secret", ["HS256"])  # signed over its own content


async def test_a_kid_map_signs_with_the_named_key() -> None:
    settings = {"signing-secrets": {"k-2025": "old-secret", "k-2026": "new-secret"}, "signing-kid": "k-2026"}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        card, _ = await fetch(http, server.url + CARD)
        assert protected_header(card)["kid"] == "k-2026"
        sdk_verify(card, "new-secret", ["HS256"])


async def test_an_ambiguous_kid_map_stops_start_up() -> None:
    from iac_code.base.errors import StartupError
    from iac_code.testing import make_kernel

    with pytest.raises(StartupError, match="signing-kid"):
        make_kernel({"signing-secrets": {"a": "1", "b": "2"}})


# --------------------------------------------------------------------------- asymmetric keys (signing_jwks)


def _jwk_for(jwks: dict[str, Any], kid: str) -> PyJWK:
    (key,) = [k for k in jwks["keys"] if k["kid"] == kid]
    return PyJWK(key)


@pytest.mark.parametrize("algorithm", ["ES256", "RS256", "EdDSA"])
async def test_asymmetric_cards_verify_with_the_published_jwks(algorithm: str, tmp_path: Path) -> None:
    settings = {"card-signer": "jwks", "signing-algorithm": algorithm, "persistence-dir": str(tmp_path)}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        card, _ = await fetch(http, server.url + CARD)
        header = protected_header(card)
        assert header["alg"] == algorithm and header["typ"] == "JOSE"
        assert header["jku"] == server.url + ".well-known/jwks.json"
        jwks, _ = await fetch(http, header["jku"])
        assert all("d" not in key for key in jwks["keys"])  # public halves only
        sdk_verify(card, _jwk_for(jwks, header["kid"]), [algorithm])
        ours = await CardVerifier(jwks_url=header["jku"], require_signature=True).verify(card)
        assert (ours.valid, ours.reason) == (True, "signed")
        ext = await extended(http, server.url)
        sdk_verify(ext, _jwk_for(jwks, protected_header(ext)["kid"]), [algorithm])
        tampered = {**card, "name": "someone-else"}
        with pytest.raises(InvalidSignaturesError):
            sdk_verify(tampered, _jwk_for(jwks, header["kid"]), [algorithm])


async def _cli(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(IAC_CODE, "a2a", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_rotation_by_command_is_picked_up_and_the_old_key_stays_published(tmp_path: Path) -> None:
    settings = {"card-signer": "jwks", "persistence-dir": str(tmp_path)}
    config = tmp_path / "server.yml"
    config.write_text(yaml.safe_dump(settings))
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        card, etag = await fetch(http, server.url + CARD)
        old_kid = protected_header(card)["kid"]
        out = await _cli("keys", "rotate", "--config", str(config))
        new_kid = out.split()[-1]
        assert new_kid != old_kid
        listed = json.loads(await _cli("keys", "list", "--config", str(config), "--output", "json"))
        assert {k["kid"]: k["status"] for k in listed["keys"]} == {old_kid: "retired", new_kid: "active"}
        assert all(set(k) <= {"kid", "alg", "status", "createdAt", "retiredAt"} for k in listed["keys"])
        deadline = asyncio.get_running_loop().time() + 20
        while protected_header(card)["kid"] != new_kid:  # the server signs again once it sees the rotation
            assert asyncio.get_running_loop().time() < deadline, "the card was not signed with the new key"
            await asyncio.sleep(0.2)
            card, new_etag = await fetch(http, server.url + CARD)
        assert new_etag != etag
        jwks, _ = await fetch(http, server.url + ".well-known/jwks.json")
        assert {old_kid, new_kid} <= {k["kid"] for k in jwks["keys"]}  # the old key is in its grace period
        sdk_verify(card, _jwk_for(jwks, new_kid), ["ES256"])


async def test_signed_pushes_use_the_card_signing_keys(tmp_path: Path) -> None:
    from iac_code_push.signing import verify_notification

    from tests.test_push_delivery import FAST, receiver, send_with_push

    settings = {**FAST, "card-signer": "jwks", "push-signing": True, "persistence-dir": str(tmp_path)}
    async with receiver() as hook, start_server(settings) as server, aiohttp.ClientSession() as http:
        card, _ = await fetch(http, server.url + CARD)
        await send_with_push(http, server.url, hook.url)
        (got,) = await hook.wait_for(1)
        jwks, _ = await fetch(http, server.url + ".well-known/jwks.json")
        token = got.headers["X-A2A-Notification-Signature"]
        verify_notification(token, jwks, audience=hook.url)
        head = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
        assert head["kid"] == protected_header(card)["kid"]


async def test_the_jwks_route_is_behind_the_same_auth_as_the_card(tmp_path: Path) -> None:
    settings = {"card-signer": "jwks", "token": "t0ken", "persistence-dir": str(tmp_path)}
    async with start_server(settings) as server, aiohttp.ClientSession() as http:
        for path in (CARD, ".well-known/jwks.json"):
            async with http.get(server.url + path) as r:
                assert r.status == 401
            async with http.get(server.url + path, headers={"Authorization": "Bearer t0ken"}) as r:
                assert r.status == 200
