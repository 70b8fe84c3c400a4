"""Run one scenario over each A2A binding (JSONRPC, HTTP+JSON, GRPC) with a2a-sdk's own client.

A :class:`Run` is one binding against one running server (``transport: [http, grpc]``,
``grpc-port: 0``): clients come from ``a2a.client.ClientFactory`` unchanged, built from
the Agent Card fetched over HTTP with ``A2ACardResolver``, as a client would get it.
:class:`Normaliser` turns protobuf results into plain data with the server-made ids,
timestamps and paths replaced by stable placeholders, so that the results of the same
scenario over two bindings compare equal.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientCallInterceptor,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest, StreamResponse
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage

from iac_code.testing import RunningServer

BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
BASE_SETTINGS: dict[str, Any] = {"transport": ["http", "grpc"], "grpc-port": 0}
STREAM_SECONDS = 15  # every stream must end by itself within this bound
SCENARIO_SECONDS = 30  # and every scenario (all its calls) within this one
# How a2a-sdk words a refused call (it raises a plain A2AClientError: a 401 carries no A2A error reason).
UNAUTHENTICATED = {"JSONRPC": "HTTP Error 401", "HTTP+JSON": "HTTP Error 401", "GRPC": "gRPC Error UNAUTHENTICATED"}


def slug(binding: str) -> str:
    return binding.lower().replace("+", "-")


# ---------------------------------------------------------------------------- requests


def text_request(text: str, message_id: str, **fields: Any) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


def envelope_of(task_or_update: ProtoMessage) -> dict[str, Any] | None:
    """``metadata.iac_code.input`` of a Task or TaskStatusUpdateEvent, as plain data."""
    envelope = MessageToDict(task_or_update.metadata).get("iac_code", {}).get("input")  # type: ignore[attr-defined]
    return envelope if isinstance(envelope, dict) else None


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every event of a stream, which must end by itself (bounded wait)."""

    async def run() -> list[StreamResponse]:
        return [event async for event in stream]

    return await asyncio.wait_for(run(), STREAM_SECONDS)


def payload(event: StreamResponse) -> ProtoMessage:
    return getattr(event, event.WhichOneof("payload"))


def task_id_of(event: StreamResponse) -> str:
    body = payload(event)
    return body.id if event.HasField("task") else body.task_id  # type: ignore[attr-defined]


def agent_texts(task: ProtoMessage) -> list[str]:
    return [p.text for m in task.history if m.role == Role.ROLE_AGENT  # type: ignore[attr-defined]
            for p in m.parts if p.text]


# ---------------------------------------------------------------------------- auth


class StaticCredentials(CredentialService):
    """One credential for every security scheme the card names."""

    def __init__(self, credential: str) -> None:
        self.credential = credential

    async def get_credentials(self, security_scheme_name: str, context: ClientCallContext | None) -> str | None:
        return self.credential


def bearer(token: str) -> ClientCallInterceptor:
    """a2a-sdk's AuthInterceptor: ``Authorization: Bearer <token>`` for the card's bearer scheme."""
    return AuthInterceptor(StaticCredentials(token))


# ---------------------------------------------------------------------------- normalising

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"\b(?:[0-9a-f]{32}|[0-9a-f]{16})\b")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")


@dataclass
class Normaliser:
    """Replaces server-made ids (numbered by first appearance), timestamps and local paths."""

    paths: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def _id(self, kind: str, value: str) -> str:
        return self.ids.setdefault(value, f"<{kind}-{len(self.ids) + 1}>")

    def text(self, value: str) -> str:
        for path, placeholder in sorted(self.paths.items(), key=lambda item: -len(item[0])):
            value = value.replace(path, placeholder)
        value = _TIMESTAMP.sub("<ts>", value)
        value = _UUID.sub(lambda m: self._id("id", m.group()), value)
        return _HEX.sub(lambda m: self._id("hex", m.group()), value)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, ProtoMessage):
            value = MessageToDict(value)
        if isinstance(value, dict):
            return {k: ("<ts>" if k == "timestamp" else self(value[k])) for k in sorted(value)}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, BaseException):
            return {"error": type(value).__name__, "message": self.text(str(getattr(value, "message", value)))}
        return value


async def error_of(call: Awaitable[Any]) -> BaseException:
    """The exception ``call`` raises (it must raise, within the bound)."""
    try:
        result = await asyncio.wait_for(call, STREAM_SECONDS)
    except TimeoutError:
        raise
    except Exception as exc:  # the scenario asserts on its type
        return exc
    raise AssertionError(f"expected an error, got {result!r}")


# ---------------------------------------------------------------------------- one binding


@dataclass
class Run:
    """One binding of one server: a2a-sdk clients built from the server's public Agent Card."""

    binding: str
    server: RunningServer
    http: httpx.AsyncClient
    workspace: Path
    card: AgentCard
    normalise: Normaliser
    clients: list[Client] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return slug(self.binding)

    def client(self, *, streaming: bool, interceptors: list[ClientCallInterceptor] | None = None) -> Client:
        if self.binding == "GRPC":
            config = ClientConfig(streaming=streaming, supported_protocol_bindings=[self.binding],
                                  grpc_channel_factory=grpc.aio.insecure_channel)
        else:
            config = ClientConfig(streaming=streaming, supported_protocol_bindings=[self.binding],
                                  httpx_client=self.http)
        client = ClientFactory(config).create(self.card, interceptors)
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


async def fetch_card(server: RunningServer, http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> AgentCard:
    """The public Agent Card, fetched as a client would (``/.well-known/agent-card.json``)."""
    return await A2ACardResolver(http, server.url).get_agent_card(http_kwargs={"headers": headers} if headers else None)


Scenario = Callable[[Run], Awaitable[Any]]


async def run_scenario(scenario: Scenario, binding: str, server: RunningServer, workspace: Path,
                       card_headers: dict[str, str] | None = None) -> Any:
    """Run ``scenario`` over ``binding``; its (normalised) outcome.

    The caller has made ``workspace`` the process's working directory: the server's
    default workspace for messages without ``metadata.iac_code.cwd``.
    """
    async with httpx.AsyncClient(timeout=STREAM_SECONDS) as http:
        card = await fetch_card(server, http, card_headers)
        normalise = Normaliser(paths={str(server.kernel.state_dir): "<state>", str(workspace): "<workspace>"})
        run = Run(binding=binding, server=server, http=http, workspace=workspace, card=card, normalise=normalise)
        try:
            async with asyncio.timeout(SCENARIO_SECONDS):
                return await scenario(run)
        finally:
            await run.close()
