"""Push-notification security: the callback URL guard and DNS pinning, secret encryption, signed notifications.

Real DNS is not available offline, so name-resolution tests replace
``socket.getaddrinfo`` (which the event loop's resolver calls in a thread) for
fake ``*.test`` names only; every other name and every literal goes to the real
function. The pinning tests run a real aiohttp server on 127.0.0.1 and count
its TCP connections.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import os
import re
import socket
import ssl
import stat
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from iac_code_push.crypto import (
    ENCRYPTED_FIELDS,
    KEYRING_ENV,
    KEYRING_FILE,
    JobCipher,
    PushKeyring,
    PushSecretError,
)
from iac_code_push.signing import (
    SIGNING_KEY_FILE,
    NotificationSigner,
    NotificationVerificationError,
    load_or_create_signing_key,
    public_jwks,
    verify_notification,
)
from iac_code_push.urls import (
    NO_ADDRESSES_MESSAGE,
    NO_HOST_MESSAGE,
    PRIVATE_HOST_MESSAGE,
    PRIVATE_RESOLVED_MESSAGE,
    SCHEME_MESSAGE,
    PinnedConnector,
    PinnedResolver,
    PushAddressRefused,
    PushUrlError,
    PushUrlGuard,
    check_static,
    refusal_of,
)
from jwcrypto import jwk, jwt

from iac_code.api import PushJob, write_new_private_file

PUBLIC = "8.8.8.8"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- the static rules (spec §2) -----------------------------------------------------------------

NOT_HTTP = ["ftp://example.com/hook", "file:///etc/passwd", "javascript:alert(1)", "example.com/hook", "//example.com/x",
            "http:///path", "https://", "http://:80/", "http://example.com:0/", "http://example.com:99999/",
            "http://example.com:port/", "http://[::1/", "ftp://localhost/", "gopher://10.0.0.1/"]

LOCAL_NAMES = ["http://localhost/", "https://LOCALHOST:8443/x", "http://localhost./", "http://api.localhost/",
               "http://a.b.localhost../", "http://%6c%6fcalhost/", "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/"]

PRIVATE_LITERALS = [
    # private, loopback, link-local, unspecified, multicast, reserved
    "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1:8080/", "http://127.0.0.1/", "http://127.8.9.10/",
    "http://127.0.0.1./", "http://169.254.169.254/latest/meta-data", "http://0.0.0.0/", "http://224.0.0.1/",
    "http://240.0.0.1/", "http://255.255.255.255/", "http://[::1]/", "http://[::]/", "http://[fc00::1]/",
    "http://[fd12:3456::1]/", "http://[fe80::1]/", "http://[fe80::1%25eth0]/", "http://[ff02::1]/",
    # IPv4-mapped (and 6to4) IPv6, judged as the IPv4 address inside
    "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:169.254.169.254]/", "http://[0:0:0:0:0:ffff:c0a8:0101]/", "http://[2002:7f00:1::]/",
    # the inet_aton spellings resolvers accept
    "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/", "http://127.1/", "http://0x7f000001/",
    "http://017700000001/", "http://0x7F.0.0.1/", "http://10.1/", "http://192.168.257/", "http://0xa9.0xfe.0xa9.0xfe/",
    "http://2852039166/", "http://0/", "http://0x0.0/", "http://127.0.0.1%20x/",
    # the shared range, where Alibaba Cloud's instance metadata service answers, in every form
    "http://100.100.100.200/latest/meta-data/", "http://100.64.0.1/", "http://100.127.255.254/",
    "http://1684301000/", "http://[::ffff:100.100.100.200]/", "http://[::ffff:6464:64c8]/",
    # NAT64 (well-known and local-use prefixes) of refused addresses
    "http://[64:ff9b::100.100.100.200]/", "http://[64:ff9b::7f00:1]/", "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b:1::a00:1]/",
]

ACCEPTED = ["https://example.com/hook", "http://hooks.example.com:8080/a2a?x=1", "http://8.8.8.8/",
            "https://[2001:4860:4860::8888]/", "http://[::ffff:8.8.8.8]/", "http://100.63.255.255/", "http://100.128.0.1/",
            "http://[64:ff9b::808:808]/", "http://metadatas.example.com/", "http://internal.example.com/",
            "http://134744072/", "http://0x08080808/", "http://deadbeef/", "http://1e100.net/", "http://example.com./",
            "http://localhost.example.com/", "http://user:pw@example.com/"]


@pytest.mark.parametrize("url", NOT_HTTP)
def test_scheme_and_host_are_required(url: str) -> None:
    with pytest.raises(PushUrlError) as caught:
        check_static(url)
    assert str(caught.value) == SCHEME_MESSAGE


METADATA_NAMES = ["http://metadata/computeMetadata/v1/", "http://metadata.google.internal/",
                  "http://METADATA.tencentyun.com/", "http://instance-data.ec2.internal/", "http://foo.internal./"]


@pytest.mark.parametrize("url", LOCAL_NAMES + METADATA_NAMES)
def test_localhost_names_are_refused(url: str) -> None:
    with pytest.raises(PushUrlError) as caught:
        check_static(url)
    assert str(caught.value) == PRIVATE_HOST_MESSAGE


@pytest.mark.parametrize("url", PRIVATE_LITERALS)
def test_private_literal_addresses_are_refused_in_every_spelling(url: str) -> None:
    with pytest.raises(PushUrlError) as caught:
        check_static(url)
    assert str(caught.value) == PRIVATE_HOST_MESSAGE


@pytest.mark.parametrize("url", ACCEPTED)
def test_public_hosts_are_accepted(url: str) -> None:
    check_static(url)


def test_the_error_is_a_value_error_with_the_spec_message() -> None:
    with pytest.raises(ValueError, match="^A2A push callback URL must not target private or local hosts$"):
        check_static("http://[::ffff:127.0.0.1]:8080/")


# --- push-allowed-hosts exemptions -------------------------------------------------------------------


def test_listed_names_addresses_and_networks_are_exempt() -> None:
    guard = PushUrlGuard(["localhost", "10.0.0.0/8", "[::1]", "Hooks.Internal."])
    for url in ("http://localhost:8080/", "http://LOCALHOST./", "http://10.1.2.3/", "http://[::1]:9/",
                "http://[::ffff:10.0.0.5]/", "http://0x0a.1/", "http://167772161/", "http://hooks.internal/"):
        guard.check_static(url)
    for url in ("http://127.0.0.1/", "http://192.168.1.1/", "http://api.localhost/", "http://[::ffff:127.0.0.1]/",
                "http://0x7f.1/"):
        with pytest.raises(PushUrlError, match=PRIVATE_HOST_MESSAGE):
            guard.check_static(url)
    with pytest.raises(PushUrlError, match=SCHEME_MESSAGE):
        guard.check_static("ftp://localhost/")  # the scheme rule comes first, listed or not


def test_an_explicit_entry_opens_the_shared_range_and_metadata_names() -> None:
    for entry, url in (("100.100.100.200", "http://100.100.100.200/hook"), ("100.64.0.0/10", "http://100.64.3.4/"),
                       ("hooks.internal", "http://hooks.internal/"), ("100.64.0.0/10", "http://[64:ff9b::6440:304]/")):
        with pytest.raises(PushUrlError, match=PRIVATE_HOST_MESSAGE):
            PushUrlGuard().check_static(url)
        PushUrlGuard([entry]).check_static(url)


def test_bad_allowed_host_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="push-allowed-hosts"):
        PushUrlGuard(["10.0.0.0/33"])
    with pytest.raises(ValueError, match="push-allowed-hosts"):
        PushUrlGuard(["not a host"])


# --- name resolution (fake names only) ------------------------------------------------------------------------


@dataclass
class FakeDns:
    """Answers for fake names: each call takes the next answer (the last repeats); records calls and threads."""

    answers: dict[str, list[list[str] | Exception]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def set(self, name: str, *answers: list[str] | Exception) -> None:
        self.answers[name] = list(answers)


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    dns = FakeDns()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in dns.answers:
            return real(host, port, family, type, proto, flags)
        dns.calls.append(name)
        dns.threads.append(threading.current_thread())
        queue = dns.answers[name]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        infos: list[tuple[Any, ...]] = []
        for address in answer:
            if ":" in address:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0), 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0))))
        return [info for info in infos if family in (0, info[0])]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns


async def test_resolution_returns_validated_addresses_off_the_event_loop(fake_dns: FakeDns) -> None:
    fake_dns.set("public.test", [PUBLIC, "2001:4860:4860::8888", PUBLIC])
    guard = PushUrlGuard()
    assert await guard.resolve("https://public.test/hook") == [PUBLIC, "2001:4860:4860::8888"]
    await guard.check("https://public.test/hook")
    assert threading.main_thread() not in fake_dns.threads  # the look-up ran in the executor


async def test_every_resolved_address_must_pass(fake_dns: FakeDns) -> None:
    fake_dns.set("loopback.test", ["127.0.0.1"])
    fake_dns.set("mixed.test", [PUBLIC, "10.0.0.7"])
    fake_dns.set("mapped.test", ["::ffff:169.254.169.254"])
    fake_dns.set("meta.test", ["100.100.100.200"])
    fake_dns.set("nat64.test", ["64:ff9b::6464:64c8"])
    guard = PushUrlGuard()
    for url in ("http://loopback.test/", "https://mixed.test:8443/", "http://mapped.test/", "http://meta.test/",
                "http://nat64.test/"):
        with pytest.raises(PushUrlError) as caught:
            await guard.check(url)  # when a configuration is stored
        assert str(caught.value) == PRIVATE_RESOLVED_MESSAGE
        with pytest.raises(PushUrlError, match=PRIVATE_RESOLVED_MESSAGE):
            await guard.resolve(url)  # at delivery: refused before any connection


async def test_no_addresses_and_dns_failures(fake_dns: FakeDns) -> None:
    fake_dns.set("empty.test", [])
    fake_dns.set("nxdomain.test", socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    guard = PushUrlGuard()
    with pytest.raises(PushUrlError, match=f"^{NO_ADDRESSES_MESSAGE}$"):
        await guard.check("http://empty.test/")
    with pytest.raises(PushUrlError, match=f"^{NO_ADDRESSES_MESSAGE}$"):  # storing: nothing to deliver to
        await guard.check("http://nxdomain.test/")
    with pytest.raises(OSError) as caught:  # resolving (delivery): transient, not a refusal
        await guard.resolve("http://nxdomain.test/")
    assert not isinstance(caught.value, PushUrlError)


async def test_static_rules_apply_before_any_lookup(fake_dns: FakeDns) -> None:
    fake_dns.set("x.localhost", [PUBLIC])
    guard = PushUrlGuard()
    with pytest.raises(PushUrlError, match=PRIVATE_HOST_MESSAGE):
        await guard.check("http://x.localhost/")
    assert await guard.resolve("http://0x08080808:81/") == [PUBLIC]  # a literal: no look-up
    with pytest.raises(PushUrlError, match=PRIVATE_HOST_MESSAGE):
        await guard.resolve("http://0x7f.1/")
    assert fake_dns.calls == []


async def test_listed_names_are_not_screened_and_names_never_match_networks(fake_dns: FakeDns) -> None:
    fake_dns.set("hooks.test", ["127.0.0.1"])
    fake_dns.set("internal.test", ["10.20.30.40"])
    fake_dns.set("other.test", ["192.168.0.9"])
    guard = PushUrlGuard(["hooks.test", "10.0.0.0/8"])
    assert await guard.resolve("http://hooks.test:8080/") == ["127.0.0.1"]
    assert await guard.resolve("http://10.20.30.40/") == ["10.20.30.40"]  # a literal inside a listed network
    for url in ("http://internal.test/", "http://other.test/"):  # a name is never resolved to match a network
        with pytest.raises(PushUrlError, match=PRIVATE_RESOLVED_MESSAGE):
            await guard.check(url)


async def test_pinned_resolver_looks_up_once_and_keeps_the_name(fake_dns: FakeDns) -> None:
    fake_dns.set("public.test", [PUBLIC])
    resolver = PinnedResolver(PushUrlGuard())
    results = await resolver.resolve("public.test", 443, socket.AF_UNSPEC)
    assert [(r["hostname"], r["host"], r["port"], r["family"]) for r in results] == [("public.test", PUBLIC, 443, socket.AF_INET)]
    assert fake_dns.calls == ["public.test"]
    with pytest.raises(PushAddressRefused) as caught:
        await resolver.resolve("10.0.0.1", 80)  # literals are screened too
    assert str(caught.value) == PRIVATE_HOST_MESSAGE and isinstance(caught.value, OSError)
    with pytest.raises(PushAddressRefused, match=NO_HOST_MESSAGE):
        await resolver.resolve("", 80)
    await resolver.close()


# --- pinning against a real server -----------------------------------------------------------------------------


@dataclass
class HookServer:
    port: int
    connections: int = 0
    hosts: list[str] = field(default_factory=list)


async def _serve(ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[HookServer]:
    """A real aiohttp server on 127.0.0.1 that counts the TCP connections it accepts."""
    hook = HookServer(port=0)

    async def handle(request: web.BaseRequest) -> web.Response:
        hook.hosts.append(request.host)
        return web.Response(text="ok")

    server = web.Server(handle)

    def protocol() -> Any:
        hook.connections += 1
        return server()

    listener = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0, ssl=ssl_context)
    hook.port = listener.sockets[0].getsockname()[1]
    try:
        yield hook
    finally:
        listener.close()
        await server.shutdown(1)
        await listener.wait_closed()


@pytest.fixture
async def hook_server() -> AsyncIterator[HookServer]:
    async for hook in _serve():
        yield hook


async def _post(connector: aiohttp.BaseConnector, url: str, **kwargs: Any) -> int:
    async with aiohttp.ClientSession(connector=connector) as session, session.post(url, json={"x": 1}, **kwargs) as r:
        return r.status


async def test_a_name_resolving_to_loopback_never_gets_a_connection(fake_dns: FakeDns, hook_server: HookServer) -> None:
    fake_dns.set("evil.test", ["127.0.0.1"])
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await _post(PinnedConnector(PushUrlGuard()), f"http://evil.test:{hook_server.port}/hook")
    refusal = refusal_of(caught.value)
    assert isinstance(refusal, PushAddressRefused) and str(refusal) == PRIVATE_RESOLVED_MESSAGE
    assert hook_server.connections == 0


async def test_a_listed_name_connects_with_its_own_host_header(fake_dns: FakeDns, hook_server: HookServer) -> None:
    fake_dns.set("hooks.test", ["127.0.0.1"])
    guard = PushUrlGuard(["hooks.test"])
    url = f"http://hooks.test:{hook_server.port}/hook"
    await guard.check(url)
    assert await _post(PinnedConnector(guard), url) == 200
    assert hook_server.connections == 1 and hook_server.hosts == [f"hooks.test:{hook_server.port}"]


async def test_dns_rebinding_after_the_check_is_refused_at_connect(fake_dns: FakeDns, hook_server: HookServer) -> None:
    url = f"http://rebind.test:{hook_server.port}/hook"
    guard = PushUrlGuard()
    # Without pinning the attack works: the check sees a public address, the client's own look-up gets loopback.
    fake_dns.set("rebind.test", [PUBLIC], ["127.0.0.1"])
    await guard.check(url)
    assert await _post(aiohttp.TCPConnector(resolver=aiohttp.ThreadedResolver(), use_dns_cache=False), url) == 200
    assert hook_server.connections == 1
    # With the pinned connector the addresses connected to are the ones screened, from one look-up.
    fake_dns.set("rebind.test", [PUBLIC], ["127.0.0.1"])
    fake_dns.calls.clear()
    await guard.check(url)
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await _post(PinnedConnector(guard), url)
    assert str(refusal_of(caught.value)) == PRIVATE_RESOLVED_MESSAGE
    assert hook_server.connections == 1 and fake_dns.calls == ["rebind.test", "rebind.test"]


async def test_the_pinned_resolver_in_a_plain_connector(fake_dns: FakeDns, hook_server: HookServer) -> None:
    fake_dns.set("evil.test", ["127.0.0.1"])
    fake_dns.set("hooks.test", ["127.0.0.1"])
    guard = PushUrlGuard(["hooks.test"])
    connector = aiohttp.TCPConnector(resolver=PinnedResolver(guard), use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(f"http://hooks.test:{hook_server.port}/") as response:
            assert response.status == 200
        with pytest.raises(aiohttp.ClientConnectorDNSError):
            await session.get(f"http://evil.test:{hook_server.port}/")
    assert hook_server.connections == 1


async def test_literal_address_urls_are_screened_by_the_pinned_connector(hook_server: HookServer) -> None:
    url = f"http://127.0.0.1:{hook_server.port}/hook"
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await _post(PinnedConnector(PushUrlGuard()), url)
    assert str(refusal_of(caught.value)) == PRIVATE_HOST_MESSAGE and hook_server.connections == 0
    assert await _post(PinnedConnector(PushUrlGuard(["127.0.0.1"])), url) == 200
    assert hook_server.connections == 1


def _certificate(name: str, directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_tls_keeps_the_original_name_for_sni_and_certificate_checks(fake_dns: FakeDns, tmp_path: Path) -> None:
    fake_dns.set("secure-hooks.test", ["127.0.0.1"])
    cert, key = _certificate("secure-hooks.test", tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    names: list[str | None] = []
    server_context.sni_callback = lambda sock, name, context: names.append(name)
    client_context = ssl.create_default_context(cafile=str(cert))
    async for hook in _serve(server_context):
        guard = PushUrlGuard(["secure-hooks.test"])
        url = f"https://secure-hooks.test:{hook.port}/hook"
        assert await _post(PinnedConnector(guard), url, ssl=client_context) == 200
        assert names == ["secure-hooks.test"] and hook.hosts == [f"secure-hooks.test:{hook.port}"]


# --- the keyring (spec §3.2) ----------------------------------------------------------------------------------------

KEY_ID = re.compile(r"push-\d+-[0-9a-f]{12}")


def test_a_new_keyring_is_generated_once_owner_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    keyring = PushKeyring.load(state, env={})
    path = state / KEYRING_FILE
    assert mode(state) == 0o700 and mode(path) == 0o600 and not keyring.env_managed
    text = path.read_text()
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True)
    assert list(document) == ["activeKeyId", "keys"] and KEY_ID.fullmatch(document["activeKeyId"])
    [entry] = document["keys"]
    assert sorted(entry) == ["createdAt", "fernetKey", "id"] and entry["id"] == document["activeKeyId"]
    assert len(entry["fernetKey"]) == 44 and isinstance(entry["createdAt"], int)
    again = PushKeyring.load(state, env={})
    assert again.key_ids == keyring.key_ids and again.active_key_id == keyring.active_key_id
    assert again.decrypt(keyring.encrypt(b"secret")) == b"secret"
    assert [p.name for p in state.iterdir()] == [KEYRING_FILE]  # no temp file left behind


def test_a_key_file_is_never_replaced_by_a_second_creator(tmp_path: Path) -> None:
    first = PushKeyring.load(tmp_path, env={})
    assert not write_new_private_file(tmp_path / KEYRING_FILE, b"{}")
    assert PushKeyring.load(tmp_path, env={}).key_ids == first.key_ids


def test_concurrent_first_loads_share_one_key(tmp_path: Path) -> None:
    results: list[PushKeyring] = []
    barrier = threading.Barrier(4)

    def load() -> None:
        barrier.wait()
        results.append(PushKeyring.load(tmp_path, env={}))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({keyring.active_key_id for keyring in results}) == 1


def test_key_files_are_created_exclusively_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_link(source: Any, target: Any) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_link)
    keyring = PushKeyring.load(tmp_path / "state", env={})
    assert mode(tmp_path / "state" / KEYRING_FILE) == 0o600
    assert not write_new_private_file(tmp_path / "state" / KEYRING_FILE, b"{}")
    assert PushKeyring.load(tmp_path / "state", env={}).key_ids == keyring.key_ids
    assert [p.name for p in (tmp_path / "state").iterdir()] == [KEYRING_FILE]


def _keyring_json(*ids: str, active: str | None = None) -> str:
    keys = [{"id": key_id, "fernetKey": Fernet.generate_key().decode(), "createdAt": 1796217695} for key_id in ids]
    return json.dumps({"activeKeyId": active or ids[0], "keys": keys})


def test_an_environment_keyring_is_used_and_never_written(tmp_path: Path) -> None:
    env = {KEYRING_ENV: _keyring_json("env-a", "env-b", active="env-b")}
    keyring = PushKeyring.load(tmp_path, env=env)
    assert keyring.env_managed and keyring.active_key_id == "env-b" and keyring.key_ids == ["env-a", "env-b"]
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PushSecretError) as caught:
        keyring.rotate(tmp_path)
    assert str(caught.value) == "A2A push secret keyring is environment-managed and cannot be rotated locally"
    assert list(tmp_path.iterdir()) == []
    assert not PushKeyring.load(tmp_path, env={KEYRING_ENV: "  "}).env_managed  # empty: unset


@pytest.mark.parametrize("text", ["not json", "[]", '{"activeKeyId": "a"}', '{"activeKeyId": "a", "keys": {}}',
                                  '{"activeKeyId": "a", "keys": ["a"]}', '{"activeKeyId": "a", "keys": [{"id": "a"}]}',
                                  '{"activeKeyId": "a", "keys": [{"id": "a", "fernetKey": "short"}]}'])
def test_a_malformed_keyring_is_refused(tmp_path: Path, text: str) -> None:
    for env in ({KEYRING_ENV: text}, {}):
        (tmp_path / KEYRING_FILE).write_text(text)
        with pytest.raises(PushSecretError) as caught:
            PushKeyring.load(tmp_path, env=env)
        assert str(caught.value) == "A2A push secret keyring is malformed"


def test_duplicate_key_ids_are_malformed(tmp_path: Path) -> None:
    document = json.loads(_keyring_json("a"))
    document["keys"].append(json.loads(_keyring_json("a"))["keys"][0])
    with pytest.raises(PushSecretError, match="^A2A push secret keyring is malformed$"):
        PushKeyring.load(tmp_path, env={KEYRING_ENV: json.dumps(document)})


@pytest.mark.parametrize("active", ["missing", None])
def test_a_keyring_without_its_active_key_is_refused(tmp_path: Path, active: str | None) -> None:
    document = json.loads(_keyring_json("a", "b"))
    document["activeKeyId"] = active
    with pytest.raises(PushSecretError) as caught:
        PushKeyring.load(tmp_path, env={KEYRING_ENV: json.dumps(document)})
    assert str(caught.value) == "A2A push secret keyring does not contain its active key"


def test_created_at_is_optional(tmp_path: Path) -> None:
    document = json.loads(_keyring_json("a"))
    del document["keys"][0]["createdAt"]
    assert PushKeyring.load(tmp_path, env={KEYRING_ENV: json.dumps(document)}).key_ids == ["a"]


def test_rotation_adds_an_active_key_and_keeps_the_old_ones(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    old_id = keyring.active_key_id
    old = keyring.encrypt(b"before rotation")
    new_id = keyring.rotate(tmp_path, key_id="push-9999999999-000000000000")
    assert new_id == keyring.active_key_id == "push-9999999999-000000000000" != old_id
    assert keyring.encrypt(b"x")["keyId"] == new_id and keyring.decrypt(old) == b"before rotation"
    document = json.loads((tmp_path / KEYRING_FILE).read_text())
    assert document["activeKeyId"] == new_id and [k["id"] for k in document["keys"]] == sorted([old_id, new_id])
    assert mode(tmp_path / KEYRING_FILE) == 0o600
    reloaded = PushKeyring.load(tmp_path, env={})
    assert reloaded.active_key_id == new_id and reloaded.decrypt(old) == b"before rotation"
    assert KEY_ID.fullmatch(reloaded.rotate(tmp_path))
    with pytest.raises(PushSecretError) as caught:
        reloaded.rotate(tmp_path, key_id=new_id)
    assert str(caught.value) == f"A2A push secret encryption key already exists: {new_id}"


def test_another_process_rotation_is_picked_up_on_an_unknown_key(tmp_path: Path) -> None:
    mine, theirs = PushKeyring.load(tmp_path, env={}), PushKeyring.load(tmp_path, env={})
    theirs.rotate(tmp_path)
    assert mine.decrypt(theirs.encrypt(b"hello")) == b"hello"
    assert mine.active_key_id == theirs.active_key_id  # the new active key was adopted with it


def test_rotation_on_the_class_rotates_the_file_and_running_keyrings_adopt_it(tmp_path: Path) -> None:
    running = PushKeyring.load(tmp_path, env={})
    old_id = running.active_key_id
    new_id = PushKeyring.rotate_file(tmp_path, env={})  # what ``iac-code a2a push-key-rotate`` does
    assert new_id != old_id and PushKeyring.load(tmp_path, env={}).active_key_id == new_id
    assert running.active_key_id == old_id  # looked at again only every few seconds
    assert running.refresh() is False  # not yet due
    assert running.refresh(force=True) is True
    assert running.active_key_id == new_id and running.key_ids == sorted([old_id, new_id])
    with pytest.raises(PushSecretError, match="environment-managed"):
        PushKeyring.rotate_file(tmp_path, env={KEYRING_ENV: _keyring_json("env-a")})


def test_a_key_file_readable_by_others_is_restricted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    PushKeyring.load(tmp_path, env={})
    os.chmod(tmp_path / KEYRING_FILE, 0o644)
    with caplog.at_level(logging.WARNING, logger="iac_code.base.storage"):
        PushKeyring.load(tmp_path, env={})
    assert mode(tmp_path / KEYRING_FILE) == 0o600
    assert any("readable by other users" in record.getMessage() for record in caplog.records)


def test_decryption_errors(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path / "a", env={})
    other = PushKeyring.load(tmp_path / "b", env={})
    envelope = keyring.encrypt(b"secret")
    with pytest.raises(PushSecretError) as caught:
        other.decrypt(envelope)
    assert str(caught.value) == f"A2A push secret encryption key is not available: {envelope['keyId']}"
    tampered = {**envelope, "ciphertext": envelope["ciphertext"][:-6] + "AAAAAA"}
    for bad in (tampered, {**envelope, "ciphertext": "not a token"}, {"keyId": envelope["keyId"]}):
        with pytest.raises(PushSecretError) as caught:
            keyring.decrypt(bad)
        assert str(caught.value) == "A2A push secret ciphertext could not be decrypted"


# --- config field encryption (spec §3.1) ---------------------------------------------------------------------------

CONFIG = {"taskId": "task-1", "id": "hook-1", "url": "https://hooks.example.com/a2a", "token": "tok-SECRET-1",
          "authentication": {"scheme": "Bearer", "credentials": "cred-SECRET-2"}}


def test_config_secrets_are_encrypted_and_restored(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    stored = keyring.encrypt_fields(CONFIG)
    text = json.dumps(stored)
    assert "SECRET" not in text and "token" not in stored and "credentials" not in stored["authentication"]
    assert stored["authentication"] == {"scheme": "Bearer"}
    assert {k: v for k, v in stored.items() if k != ENCRYPTED_FIELDS} == {
        "taskId": "task-1", "id": "hook-1", "url": "https://hooks.example.com/a2a", "authentication": {"scheme": "Bearer"}}
    encrypted = stored[ENCRYPTED_FIELDS]
    assert encrypted["version"] == 1 and sorted(encrypted["fields"]) == ["authentication.credentials", "token"]
    for envelope in encrypted["fields"].values():
        assert sorted(envelope) == ["ciphertext", "keyId"] and envelope["keyId"] == keyring.active_key_id
    assert keyring.decrypt_fields(stored) == CONFIG
    assert CONFIG["token"] == "tok-SECRET-1"  # the input is untouched
    assert keyring.decrypt_fields(json.loads(text)) == CONFIG


def test_configs_without_secrets_or_encryption(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    plain = {"taskId": "t", "id": "c", "url": "https://hooks.example.com/"}
    assert keyring.encrypt_fields(plain) == plain and keyring.decrypt_fields(plain) == plain
    only_token = keyring.encrypt_fields({**plain, "token": "x"})
    assert list(only_token[ENCRYPTED_FIELDS]["fields"]) == ["token"]
    assert keyring.decrypt_fields(only_token) == {**plain, "token": "x"}


def test_config_decryption_needs_the_key(tmp_path: Path) -> None:
    stored = PushKeyring.load(tmp_path / "a", env={}).encrypt_fields(CONFIG)
    with pytest.raises(PushSecretError, match="encryption key is not available"):
        PushKeyring.load(tmp_path / "b", env={}).decrypt_fields(stored)


# --- the job codec ------------------------------------------------------------------------------------------------


def _job(**changes: Any) -> PushJob:
    payload = {"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1",
                                "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "done " * 150}]}}}}
    job = PushJob.new(task_id="task-1", config_id="hook-1", owner="bearer", url="https://hooks.example.com/a2a",
                      payload=payload)
    return job.rescheduled(at=1796217695.5, attempt=2, last_error="RuntimeError: HTTP 503") if not changes else \
        PushJob(**{**job.__dict__, **changes})


def test_jobs_round_trip_encrypted(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    cipher, job = JobCipher(keyring), _job()
    data = cipher.encode(job)
    document = json.loads(data)
    assert data == json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    envelope = document["iacCodeEncryptedPushJob"]
    assert list(envelope) == ["ciphertext", "keyId", "version"]
    assert envelope["version"] == 1 and envelope["keyId"] == keyring.active_key_id
    assert b"hooks.example.com" not in data and b"done" not in data
    assert cipher.decode(data) == job and cipher.decode(data.decode()) == job
    inner = Fernet(keyring.active_key.fernet_key).decrypt(envelope["ciphertext"])
    assert inner == json.dumps(job.to_record(), sort_keys=True, separators=(",", ":")).encode()


def test_job_secret_headers_are_redacted_and_big_numbers_kept(tmp_path: Path) -> None:
    cipher = JobCipher(PushKeyring.load(tmp_path, env={}))
    job = _job(headers={"Authorization": "Bearer x", "X-Trace": "1"}, payload={"task": {"metadata": {"n": 2**70}}})
    decoded = cipher.decode(cipher.encode(job))
    assert decoded.headers == {"Authorization": "[redacted]", "X-Trace": "1"}
    assert decoded.payload == {"task": {"metadata": {"n": 2**70}}}


def test_jobs_survive_rotation(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    cipher, job = JobCipher(keyring), _job()
    before = cipher.encode(job)
    keyring.rotate(tmp_path)
    assert json.loads(cipher.encode(job))["iacCodeEncryptedPushJob"]["keyId"] == keyring.active_key_id
    assert cipher.decode(before) == job


def test_job_decoding_errors(tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path / "a", env={})
    data = JobCipher(keyring).encode(_job())
    key_id = keyring.active_key_id
    with pytest.raises(ValueError) as caught:
        JobCipher(PushKeyring.load(tmp_path / "b", env={})).decode(data)
    assert str(caught.value) == f"A2A push secret encryption key is not available: {key_id}"
    same_id_other_key = PushKeyring.load(tmp_path / "c", env={KEYRING_ENV: _keyring_json(key_id)})
    with pytest.raises(ValueError, match="^A2A push secret ciphertext could not be decrypted$"):
        JobCipher(same_id_other_key).decode(data)
    envelope = json.loads(data)
    token = envelope["iacCodeEncryptedPushJob"]["ciphertext"]
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[40] ^= 1  # one flipped ciphertext bit
    envelope["iacCodeEncryptedPushJob"]["ciphertext"] = base64.urlsafe_b64encode(bytes(raw)).decode()
    with pytest.raises(ValueError, match="^A2A push secret ciphertext could not be decrypted$"):
        JobCipher(keyring).decode(json.dumps(envelope))
    for bad in (b"not json", b"[]", json.dumps(_job().to_record()).encode(), b'{"iacCodeEncryptedPushJob": {"version": 2}}'):
        with pytest.raises(ValueError):
            JobCipher(keyring).decode(bad)
    not_a_job = keyring.active_key.fernet.encrypt(b'{"jobId": "x"}').decode()
    with pytest.raises(ValueError, match="^Stored A2A push job is malformed$"):
        JobCipher(keyring).decode(json.dumps({"iacCodeEncryptedPushJob": {"ciphertext": not_a_job, "keyId": key_id,
                                                                           "version": 1}}))


def test_without_a_keyring_jobs_cannot_be_encoded_or_decoded(tmp_path: Path) -> None:
    data = JobCipher(PushKeyring.load(tmp_path, env={})).encode(_job())
    for call in (lambda: JobCipher(None).encode(_job()), lambda: JobCipher(None).decode(data)):
        with pytest.raises(ValueError) as caught:
            call()
        assert str(caught.value) == "Encrypted A2A push job requires a configured secret keyring"


# --- signed notifications -------------------------------------------------------------------------------------------

HOOK = "https://hooks.example.com/a2a"
ISSUER = "https://agent.example.com"


@pytest.fixture
def signing_key(tmp_path: Path) -> jwk.JWK:
    return load_or_create_signing_key(tmp_path / "state")


def test_the_signing_key_is_generated_once_owner_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    key = load_or_create_signing_key(state)
    assert mode(state) == 0o700 and mode(state / SIGNING_KEY_FILE) == 0o600
    assert key.has_private and key["kty"] == "EC" and key["crv"] == "P-256" and key["alg"] == "ES256"
    assert key["kid"] == key.thumbprint() and key["use"] == "sig"
    assert load_or_create_signing_key(state).thumbprint() == key.thumbprint()
    assert [p.name for p in state.iterdir()] == [SIGNING_KEY_FILE]


def test_the_jwks_holds_only_public_keys(signing_key: jwk.JWK) -> None:
    jwks = public_jwks([signing_key])
    [entry] = jwks["keys"]
    assert "d" not in entry and entry["kid"] == signing_key["kid"] and entry["alg"] == "ES256" and entry["use"] == "sig"
    assert public_jwks(signing_key) == jwks


def _split(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, claims, _ = token.split(".")

    def decode(part: str) -> dict[str, Any]:
        return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))

    return decode(header), decode(claims)


def test_a_signed_notification_verifies_with_the_jwks(signing_key: jwk.JWK) -> None:
    token = NotificationSigner(signing_key).sign(issuer=ISSUER, audience=HOOK, job_id="job-1", task_id="task-1",
                                                 now=1796217695.9, ttl=120)
    header, claims = _split(token)
    assert header == {"alg": "ES256", "kid": signing_key["kid"], "typ": "JWT"}
    assert claims == {"iss": ISSUER, "aud": HOOK, "iat": 1796217695, "exp": 1796217815, "jti": "job-1", "taskId": "task-1"}
    assert verify_notification(token, public_jwks([signing_key]), HOOK, issuer=ISSUER, now=1796217700) == claims
    # A standard JWT library accepts one too.
    token = NotificationSigner(signing_key).sign(issuer=ISSUER, audience=HOOK, job_id="job-1", task_id="task-1")
    checked = jwt.JWT(jwt=token, key=jwk.JWK(**public_jwks(signing_key)["keys"][0]), algs=["ES256"],
                      check_claims={"aud": HOOK, "exp": None})
    assert json.loads(checked.claims)["jti"] == "job-1"


def test_tampered_expired_and_misdirected_notifications_are_refused(signing_key: jwk.JWK) -> None:
    signer, jwks = NotificationSigner(signing_key), public_jwks([signing_key])
    token = signer.sign(issuer=ISSUER, audience=HOOK, job_id="job-1", task_id="task-1")
    header, claims, signature = token.split(".")
    forged_claims = base64.urlsafe_b64encode(json.dumps({**_split(token)[1], "taskId": "other"}).encode()).rstrip(b"=")
    cases: dict[str, tuple[str, dict[str, Any], str]] = {
        "forged claims": (f"{header}.{forged_claims.decode()}.{signature}", jwks, "signature is invalid"),
        "bad signature": (f"{header}.{claims}.{signature[:-4]}AAAA", jwks, "signature is invalid"),
        "not a JWS": ("abc.def", jwks, "not a compact JWS"),
        "unknown key": (token, public_jwks([jwk.JWK.generate(kty="EC", crv="P-256")]), "signing key is unknown"),
        "expired": (signer.sign(issuer=ISSUER, audience=HOOK, job_id="j", task_id="t", now=1.0e9), jwks, "has expired"),
        "wrong audience": (signer.sign(issuer=ISSUER, audience="https://evil.example/", job_id="j", task_id="t"), jwks,
                           "audience does not match"),
    }
    for candidate, keys, message in cases.values():
        with pytest.raises(NotificationVerificationError, match=message):
            verify_notification(candidate, keys, HOOK)
    with pytest.raises(NotificationVerificationError, match="issuer does not match"):
        verify_notification(token, jwks, HOOK, issuer="https://someone-else.example")


def test_unsigned_and_symmetric_algorithms_are_refused(signing_key: jwk.JWK) -> None:
    jwks = public_jwks([signing_key])
    kid = signing_key["kid"]
    _, claims, _ = NotificationSigner(signing_key).sign(issuer=ISSUER, audience=HOOK, job_id="j", task_id="t").split(".")
    for alg in ("none", "HS256"):
        header = base64.urlsafe_b64encode(json.dumps({"alg": alg, "kid": kid}).encode()).rstrip(b"=").decode()
        with pytest.raises(NotificationVerificationError, match="algorithm is not allowed"):
            verify_notification(f"{header}.{claims}.", jwks, HOOK)
    header = base64.urlsafe_b64encode(json.dumps({"alg": "ES384", "kid": kid}).encode()).rstrip(b"=").decode()
    with pytest.raises(NotificationVerificationError, match="does not match its key"):
        verify_notification(f"{header}.{claims}.AAAA", jwks, HOOK)


@pytest.mark.parametrize("params", [{"kty": "OKP", "crv": "Ed25519"}, {"kty": "RSA", "size": 2048},
                                    {"kty": "RSA", "size": 2048, "alg": "PS256"}, {"kty": "EC", "crv": "P-384"}])
def test_other_key_types_sign_and_verify(params: dict[str, Any]) -> None:
    key = jwk.JWK.generate(**params)
    signer = NotificationSigner(key)
    token = signer.sign(issuer=ISSUER, audience=HOOK, job_id="j", task_id="t")
    assert verify_notification(token, public_jwks(key), HOOK)["jti"] == "j"
    assert _split(token)[0]["alg"] == params.get("alg", {"OKP": "EdDSA", "RSA": "RS256", "EC": "ES384"}[params["kty"]])


def test_a_public_or_symmetric_key_cannot_sign(signing_key: jwk.JWK) -> None:
    with pytest.raises(ValueError):
        NotificationSigner(jwk.JWK(**public_jwks(signing_key)["keys"][0]))
    with pytest.raises(ValueError):
        NotificationSigner(jwk.JWK.generate(kty="oct", size=256))
