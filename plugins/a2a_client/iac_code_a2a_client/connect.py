"""Find a remote agent and open an a2a-sdk ``Client`` to it over the first interface we can execute.

Discovery fetches ``<url>/.well-known/agent-card.json`` (falling back to the URL's origin,
so the JSON-RPC endpoint URL works as well as the base URL), verifies the card's signature
when verification is configured, and hands the card to a2a-sdk's ``ClientFactory``. The
factory knows JSON-RPC, HTTP+JSON and gRPC; every installed transport plugin with a client
side (``TransportSpec.connect``) is registered with it too, so a ``ws://``, ``unix://``,
``stdio://``, ``grpc-jsonrpc://`` or ``redis-streams://`` interface is reachable. A URL with
such a scheme is called directly (no card to discover there).
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.client import Client, ClientConfig, ClientFactory, minimal_agent_card
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import AgentCard, AgentInterface
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from google.protobuf.json_format import ParseError

from iac_code.api import TransportSpec, normalise_name
from iac_code_a2a_client.card_verify import CardVerificationResult, CardVerifier
from iac_code_a2a_client.channel_transport import producer
from iac_code_a2a_client.errors import ClientError, ExitCode, classify, shown_url

HTTP_SCHEMES = ("http", "https")
# Binding names as a user may write them for --binding, mapped to the card's protocolBinding values.
SDK_BINDINGS = {"jsonrpc": TransportProtocol.JSONRPC, "json-rpc": TransportProtocol.JSONRPC,
                "http": TransportProtocol.JSONRPC, "rest": TransportProtocol.HTTP_JSON,
                "http+json": TransportProtocol.HTTP_JSON, "http-json": TransportProtocol.HTTP_JSON,
                "grpc": TransportProtocol.GRPC}
WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]"}


@dataclass(frozen=True)
class Auth:
    """Credentials sent on discovery and on every call (bearer wins over basic; an API key goes alongside)."""

    token: str = ""
    basic_username: str = ""
    basic_password: str = ""
    api_key: str = ""
    api_key_header: str = "X-API-Key"

    def headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        elif self.basic_username and self.basic_password:
            pair = f"{self.basic_username}:{self.basic_password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        if self.api_key:
            headers[self.api_key_header or "X-API-Key"] = self.api_key
        return headers


@dataclass
class Agent:
    """An open connection to one remote agent."""

    client: Client
    card: AgentCard
    card_json: dict[str, Any] | None
    binding: str
    interface_url: str
    verification: CardVerificationResult | None = None

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.client.close()


@dataclass
class Connector:
    """Discovers cards and opens clients with one set of credentials, options and client transports.

    ``transports`` are the installed transports with a client side, by name and alias
    (:func:`iac_code.api.client_transports`).
    """

    transports: Mapping[str, TransportSpec]
    auth: Auth = field(default_factory=Auth)
    timeout: float | None = 30.0
    verifier: CardVerifier = field(default_factory=CardVerifier)
    binding: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ transports

    def _channel_specs(self) -> dict[str, TransportSpec]:
        return {spec.name: spec for spec in self.transports.values()}

    def _executable(self) -> list[str]:
        """Bindings this client can execute, SDK ones first."""
        bindings = [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON]
        with contextlib.suppress(ImportError):
            import a2a.client.transports.grpc  # noqa: F401  (needs grpcio)

            bindings.append(TransportProtocol.GRPC)
        return bindings + list(self._channel_specs())

    def _wanted(self) -> str:
        """The card ``protocolBinding`` that ``--binding`` insists on ('' = first executable one)."""
        if not self.binding:
            return ""
        name = normalise_name(self.binding)
        if name in SDK_BINDINGS:
            return SDK_BINDINGS[name]
        if name in self.transports:
            return self.transports[name].name
        close = difflib.get_close_matches(name, sorted({*SDK_BINDINGS, *self.transports}), n=1, cutoff=0.6)
        guess = f" Did you mean '{close[0]}'?" if close else ""
        raise ClientError(f"Unknown or non-executable binding '{self.binding}'.{guess} Executable: "
                          f"{', '.join(self._executable())}.", ExitCode.NO_INTERFACE)

    def _factory(self, http: httpx.AsyncClient, streaming: bool, bindings: list[str]) -> ClientFactory:
        channel = grpc_factory = None
        if TransportProtocol.GRPC in bindings:
            from grpc import aio

            def grpc_factory(url: str) -> Any:
                return aio.insecure_channel(url)

            channel = grpc_factory
        config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=bindings,
                              grpc_channel_factory=channel, accepted_output_modes=["text/plain"])
        factory = ClientFactory(config)
        headers = {"A2A-Version": "1.0", **self.auth.headers()}
        for name, spec in self._channel_specs().items():
            if name in bindings:
                assert spec.connect is not None
                factory.register(name, producer(spec.connect, headers, self.timeout, dict(self.options)))
        return factory

    # ------------------------------------------------------------------ discovery

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, headers={**self.auth.headers(), "A2A-Version": "1.0"},
                                 follow_redirects=False)

    async def fetch_card(self, url: str, http: httpx.AsyncClient | None = None) -> tuple[dict[str, Any], str]:
        """The card JSON served for ``url`` and the address it came from."""
        require_scheme(url)
        owned = http is None
        http = http or self._http()
        try:
            last: ClientError | None = None
            for candidate in _card_urls(url):
                try:
                    response = await http.get(candidate, headers={"Accept": "application/json"})
                except Exception as exc:
                    raise classify(exc, url=url) from None
                if response.status_code in (401, 403):
                    raise classify(httpx.HTTPStatusError("", request=response.request, response=response))
                if response.status_code == 404:
                    last = ClientError(f"No Agent Card at {shown_url(candidate)} (HTTP 404).", ExitCode.INVALID_CARD)
                    continue
                if response.status_code >= 400:
                    raise ClientError(f"Fetching the Agent Card failed: HTTP {response.status_code}.",
                                      ExitCode.UNREACHABLE)
                try:
                    data = response.json()
                except ValueError:
                    data = None
                if not isinstance(data, dict):
                    raise ClientError("A2A Agent Card response must be a JSON object", ExitCode.INVALID_CARD)
                return data, candidate
            assert last is not None
            raise last
        finally:
            if owned:
                await http.aclose()

    async def discover(self, url: str, http: httpx.AsyncClient | None = None
                       ) -> tuple[dict[str, Any], AgentCard, CardVerificationResult | None]:
        """Fetch, verify (when configured) and parse the card at ``url``."""
        data, _ = await self.fetch_card(url, http)
        result = None
        if self.verifier.enabled:
            try:
                result = await self.verifier.verify(data)
            except Exception as exc:  # a JWKS that cannot be fetched, say
                raise ClientError(f"A2A Agent Card verification failed: {type(exc).__name__}",
                                  ExitCode.SIGNATURE) from None
            if not result.valid:
                raise ClientError(result.message, ExitCode.SIGNATURE)
        try:
            card = parse_agent_card(json.loads(json.dumps(data)))
        except (ParseError, ValueError, TypeError) as exc:
            raise ClientError(f"Invalid Agent Card: {str(exc)[:200]}", ExitCode.INVALID_CARD) from None
        return data, card, result

    # ------------------------------------------------------------------ open

    async def open(self, url: str, *, streaming: bool = True) -> Agent:
        """A client for the agent at ``url`` (an HTTP base/endpoint URL, or a custom transport's URL)."""
        if not url:
            raise ClientError("url is required. Provide --url or url in --config.")
        require_scheme(url)
        scheme = urlsplit(url).scheme.lower()
        wanted = self._wanted()
        http = self._http()
        try:
            if scheme in HTTP_SCHEMES:
                data, card, result = await self.discover(url, http)
                _replace_wildcard_hosts(card, url)
            else:
                data, result = None, None
                card = self._direct_card(url, scheme, wanted)
            executable = self._executable()
            bindings = [wanted] if wanted else executable
            offered = [i.protocol_binding for i in card.supported_interfaces]
            chosen = next((i for i in card.supported_interfaces if i.protocol_binding in bindings), None)
            if chosen is None:
                wanted_text = f"'{wanted}'" if wanted else f"any of {', '.join(executable)}"
                raise ClientError(f"The agent advertises no interface this client can execute "
                                  f"(it offers {', '.join(offered) or 'none'}; wanted {wanted_text}).",
                                  ExitCode.NO_INTERFACE)
            try:
                client = self._factory(http, streaming, bindings).create(card)
            except ValueError as exc:
                raise ClientError(f"No executable interface: {exc}", ExitCode.NO_INTERFACE) from None
        except BaseException:
            await http.aclose()
            raise
        interface = _selected(card, chosen.protocol_binding)
        return _Owned(client=client, card=card, card_json=data, binding=chosen.protocol_binding,
                      interface_url=interface, verification=result, http=http)

    def _direct_card(self, url: str, scheme: str, wanted: str) -> AgentCard:
        if self.verifier.require_signature:
            raise ClientError(f"A2A Agent Card verification failed: missing-signature ({scheme}:// URLs have "
                              "no card to verify; use the agent's HTTP URL)", ExitCode.SIGNATURE)
        for name, spec in self._channel_specs().items():
            if scheme in spec.url_schemes:
                if wanted and wanted != name:
                    break
                return _streaming(minimal_agent_card(url, [name]))
        if scheme in ("grpc", "grpcs"):
            return _streaming(minimal_agent_card(url.split("://", 1)[-1], [TransportProtocol.GRPC]))
        raise ClientError(f"No installed transport can call a '{scheme}://' URL. Executable: "
                          f"{', '.join(self._executable())}.", ExitCode.NO_INTERFACE)


@dataclass
class _Owned(Agent):
    http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        await super().aclose()
        if self.http is not None:
            await self.http.aclose()


def _streaming(card: AgentCard) -> AgentCard:
    """A card made up for a direct URL claims streaming: the SDK client would otherwise never stream."""
    card.capabilities.streaming = True
    return card


def require_scheme(url: str) -> None:
    """A URL without ``scheme://`` (``localhost:41242``) is named as such, with the URL it probably meant."""
    if "://" not in url:
        shown = shown_url(f"http://{url}").removeprefix("http://")
        raise ClientError(f"The URL {shown!r} has no scheme: write it as http://{shown} "
                          "(or https://, grpc://, ws://, unix://, ...).")


def _card_urls(url: str) -> list[str]:
    base = url.rstrip("/")
    parts = urlsplit(url)
    urls = [f"{base}{AGENT_CARD_WELL_KNOWN_PATH}"]
    origin = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    if parts.path.strip("/") and f"{origin}{AGENT_CARD_WELL_KNOWN_PATH}" not in urls:
        urls.append(f"{origin}{AGENT_CARD_WELL_KNOWN_PATH}")
    return urls


def _replace_wildcard_hosts(card: AgentCard, discovered: str) -> None:
    """An interface bound to ``0.0.0.0`` is reachable at the host we discovered the card on."""
    host = urlsplit(discovered).hostname or ""
    for interface in card.supported_interfaces:
        _rewrite(interface, host)


def _rewrite(interface: AgentInterface, host: str) -> None:
    url = interface.url
    parts = urlsplit(url if "://" in url else f"//{url}")
    if parts.hostname is None or parts.hostname not in {h.strip("[]") for h in WILDCARD_HOSTS}:
        return
    netloc = f"{host}:{parts.port}" if parts.port else host
    if "://" in url:
        interface.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    else:
        interface.url = netloc


def _selected(card: AgentCard, binding: str) -> str:
    for interface in card.supported_interfaces:
        if interface.protocol_binding == binding:
            return interface.url
    return ""
