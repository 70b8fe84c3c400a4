"""The official gRPC transport against a real server, through a2a-sdk's own gRPC client."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ExtensionSupportRequiredError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2
from iac_code_transport_grpc.server import STREAM_METHODS, UNARY_METHODS, KernelGrpcHandler, protocol_error

from iac_code.api import CallInfo, StartupError
from iac_code.testing import (
    A2A_HEADERS,
    RunningServer,
    make_kernel,
    permission_answer_request,
    send_message_body,
    start_server,
)
from iac_code.testing import permission_envelope as json_permission_envelope

VPC_PROMPT = "Create a VPC with two vSwitches."
HOOK_URL = "https://8.8.8.8/a2a-hook"
V1 = (("a2a-version", "1.0"),)
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


def grpc_settings(**settings: Any) -> dict[str, Any]:
    return {"transport": "grpc", "grpc-port": 0, **settings}


def text_message(text: str, message_id: str, **fields: Any) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=message_id, role=a2a_pb2.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


def auth(value: str) -> ClientCallContext:
    return ClientCallContext(service_parameters={"authorization": value})


@asynccontextmanager
async def sdk_client(server: RunningServer, *, streaming: bool = True,
                     channel: Callable[[str], grpc.aio.Channel] = grpc.aio.insecure_channel) -> AsyncIterator[Client]:
    """a2a-sdk's client over gRPC, built from the card the kernel publishes (no HTTP card with grpc alone)."""
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=["GRPC"], grpc_channel_factory=channel)
    client = ClientFactory(config).create(server.kernel.cards.card)
    try:
        yield client
    finally:
        await client.close()


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


async def send(client: Client, request: SendMessageRequest, context: ClientCallContext | None = None) -> Task:
    [response] = await collect(client.send_message(request, context=context))
    assert response.HasField("task")
    return response.task


def envelope_of(task: Task) -> dict[str, Any] | None:
    return json_permission_envelope(MessageToDict(task))


def status_of(exc: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str, str]:
    """Code, message and the ErrorInfo reason ('' without one) of a failed call."""
    reason = ""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            from google.rpc import status_pb2
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    assert info.domain == "a2a-protocol.org"
                    reason = info.reason
    return exc.code(), exc.details() or "", reason


# --------------------------------------------------------------------------- the A2A methods


async def test_unary_send_get_list_and_card() -> None:
    async with start_server(grpc_settings()) as server, sdk_client(server, streaming=False) as client:
        [interface] = server.kernel.cards.card.supported_interfaces
        assert interface.protocol_binding == "GRPC" and interface.protocol_version == "1.0"
        assert interface.url == server.url and server.url.startswith("127.0.0.1:") and not server.url.endswith(":0")

        task = await send(client, text_message("hello", "m-hello"))
        assert task.status.state == INPUT_REQUIRED
        fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert fetched.id == task.id and fetched.status.state == INPUT_REQUIRED and len(fetched.history) == 1

        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task.id]
        assert not (await client.list_tasks(ListTasksRequest(context_id="other"))).tasks

        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))

        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.name == server.kernel.cards.extended.name
        assert [i.protocol_binding for i in card.supported_interfaces] == ["GRPC"]


async def test_streaming_send() -> None:
    async with start_server(grpc_settings()) as server, sdk_client(server) as client:
        events = await collect(client.send_message(text_message("hello", "m-stream")))
        assert events[0].HasField("task")
        last = events[-1]
        assert last.HasField("status_update") and last.status_update.status.state == INPUT_REQUIRED
        task_id = events[0].task.id
        assert all((e.task.id if e.HasField("task") else getattr(e, e.WhichOneof("payload")).task_id) == task_id
                   for e in events)


async def test_permission_pause_subscribe_answer_and_cancel() -> None:
    async with start_server(grpc_settings()) as server, sdk_client(server, streaming=False) as unary, \
            sdk_client(server) as streaming:
        paused = await send(unary, text_message(VPC_PROMPT, "m-vpc-1", context_id="ctx-vpc-1"))
        assert paused.status.state == INPUT_REQUIRED
        envelope = envelope_of(paused)
        assert envelope is not None and envelope["requestTaskId"] == paused.id

        # Subscribing to a turn paused at a permission: the paused task, then the stream ends.
        events = await collect(streaming.subscribe(SubscribeToTaskRequest(id=paused.id)))
        assert [e.task.status.state for e in events] == [INPUT_REQUIRED]

        # The answer travels as a protobuf DataPart and reaches the paused turn (raw params path).
        denied = await send(unary, permission_answer_request(envelope, "deny", message_id="m-vpc-1-answer"))
        assert denied.id == paused.id
        assert envelope_of(denied) is None or envelope_of(denied)["inputId"] != envelope["inputId"]

        # A finished turn cannot be canceled (a subscription waits for its next turn: test_bindings).
        hello = await send(unary, text_message("hello", "m-hello"))
        with pytest.raises(TaskNotCancelableError):
            await unary.cancel_task(CancelTaskRequest(id=hello.id))

        # Cancel a turn paused at a permission.
        second = await send(unary, text_message(VPC_PROMPT, "m-vpc-2", context_id="ctx-vpc-2"))
        assert envelope_of(second) is not None
        canceled = await unary.cancel_task(CancelTaskRequest(id=second.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert (await unary.get_task(GetTaskRequest(id=second.id))).status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(UnsupportedOperationError, match="terminal state"):  # gRPC UNIMPLEMENTED
            await collect(streaming.subscribe(SubscribeToTaskRequest(id=second.id)))


async def test_push_config_crud() -> None:
    async with start_server(grpc_settings(**{"push-notifications": True})) as server, \
            sdk_client(server, streaming=False) as client:
        task = await send(client, text_message("hello", "m-push"))
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="hook-1", url=HOOK_URL, token="t-1"))
        assert (created.task_id, created.id, created.url) == (task.id, "hook-1", HOOK_URL)
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"))
        assert got.url == HOOK_URL
        listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
        assert [c.id for c in listed.configs] == ["hook-1"]
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"))
        listed = await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
        assert not listed.configs


async def test_push_config_refused_when_push_is_off() -> None:
    async with start_server(grpc_settings()) as server, grpc.aio.insecure_channel(server.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        task = (await stub.SendMessage(text_message("hello", "m-1"), metadata=V1)).task
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateTaskPushNotificationConfig(
                TaskPushNotificationConfig(task_id=task.id, id="h", url=HOOK_URL), metadata=V1)
        code, _, reason = status_of(refused.value)
        assert code == grpc.StatusCode.UNIMPLEMENTED and reason == "PUSH_NOTIFICATION_NOT_SUPPORTED"


# --------------------------------------------------------------------------- authentication


async def test_auth_required_and_owner_scoped() -> None:
    settings = grpc_settings(token="s3cret", **{"basic-username": "ann", "basic-password": "pw"})
    async with start_server(settings) as server, grpc.aio.insecure_channel(server.url) as channel, \
            sdk_client(server, streaming=False) as client:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for metadata in (V1, (*V1, ("authorization", "Bearer wrong")), (*V1, ("authorization", "s3cret"))):
            for call in (stub.SendMessage(text_message("hello", "m-0"), metadata=metadata),
                         stub.GetExtendedAgentCard(GetExtendedAgentCardRequest(), metadata=metadata)):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                assert status_of(refused.value) == (grpc.StatusCode.UNAUTHENTICATED, "Unauthorized", "")
        stream = stub.SendStreamingMessage(text_message("hello", "m-0"), metadata=V1)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stream.read()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        # The SDK client with credentials in its service parameters.
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await send(client, text_message("hello", "m-1"))
        bearer = auth("bearer s3cret")  # the scheme word is case-insensitive, as over HTTP
        task = await send(client, text_message("hello", "m-1"), bearer)
        assert task.status.state == INPUT_REQUIRED
        assert (await client.get_task(GetTaskRequest(id=task.id), context=bearer)).id == task.id

        # Tasks are scoped to their owner: another principal does not see them.
        basic = auth("Basic " + base64.b64encode(b"ann:pw").decode())
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id), context=basic)
        assert not (await client.list_tasks(ListTasksRequest(), context=basic)).tasks
        assert [t.id for t in (await client.list_tasks(ListTasksRequest(), context=bearer)).tasks] == [task.id]


async def test_repeated_reads_keep_owner_scope_and_see_every_change() -> None:
    """GetTask remembers admitted call metadata (the read path's shortcut): a repeat by the same caller still
    sees the task's latest state and honours historyLength, and no other caller gets in through it."""
    settings = grpc_settings(token="s3cret", **{"basic-username": "ann", "basic-password": "pw"})
    async with start_server(settings) as server, grpc.aio.insecure_channel(server.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        bearer = (*V1, ("authorization", "Bearer s3cret"))
        basic = (*V1, ("authorization", "Basic " + base64.b64encode(b"ann:pw").decode()))
        paused = (await stub.SendMessage(text_message(VPC_PROMPT, "m-vpc"), metadata=bearer)).task
        assert paused.status.state == INPUT_REQUIRED
        for _ in range(3):
            read = await stub.GetTask(GetTaskRequest(id=paused.id), metadata=bearer)
            assert read.status.state == INPUT_REQUIRED and len(read.history) == len(paused.history)
            assert len((await stub.GetTask(GetTaskRequest(id=paused.id, history_length=1),
                                           metadata=bearer)).history) == 1
            for metadata in (basic, (*V1, ("authorization", "Bearer s3cret!"))):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.GetTask(GetTaskRequest(id=paused.id), metadata=metadata)
                assert refused.value.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAUTHENTICATED)
                assert (refused.value.code() == grpc.StatusCode.NOT_FOUND) is (metadata is basic)
        assert envelope_of(read) is not None
        answered = (await stub.SendMessage(permission_answer_request(envelope_of(paused) or {}, "deny"),
                                           metadata=bearer)).task
        read = await stub.GetTask(GetTaskRequest(id=paused.id), metadata=bearer)  # the change, not the old task
        assert envelope_of(read) is None and len(read.history) == len(answered.history) > len(paused.history)
        assert read.status == answered.status


async def test_api_key_from_metadata() -> None:
    async with start_server(grpc_settings(**{"api-key": "k1", "api-key-header": "X-Team-Key"})) as server, \
            sdk_client(server, streaming=False) as client:
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await send(client, text_message("hello", "m-1"), ClientCallContext(service_parameters={"x-team-key": "no"}))
        task = await send(client, text_message("hello", "m-1"), ClientCallContext(service_parameters={"X-Team-Key": "k1"}))
        assert task.status.state == INPUT_REQUIRED


async def test_same_tasks_and_principal_as_http() -> None:
    async with start_server({"transport": ["http", "grpc"], "grpc-port": 0, "token": "t"}) as server, \
            aiohttp.ClientSession() as http:
        async with http.get(server.url + ".well-known/agent-card.json", headers={"Authorization": "Bearer t"}) as r:
            card = await r.json()
        bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
        assert bindings["GRPC"].startswith("127.0.0.1:")
        async with http.post(server.url, json=send_message_body("hello"),
                             headers={**A2A_HEADERS, "Authorization": "Bearer t"}) as r:
            task_id = (await r.json())["result"]["task"]["id"]
        config = ClientConfig(streaming=False, supported_protocol_bindings=["GRPC"],
                              grpc_channel_factory=grpc.aio.insecure_channel)
        client = ClientFactory(config).create(server.kernel.cards.card)
        try:
            assert (await client.get_task(GetTaskRequest(id=task_id), context=auth("Bearer t"))).id == task_id
        finally:
            await client.close()


# --------------------------------------------------------------------------- protocol metadata and errors


async def test_version_and_extensions_match_the_jsonrpc_dispatcher() -> None:
    settings = grpc_settings(**{"required-extensions": ["urn:example:ext"]})
    async with start_server(settings) as server, grpc.aio.insecure_channel(server.url) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        dispatcher = server.kernel.dispatcher
        assert dispatcher is not None
        ext = ("a2a-extensions", "urn:other, urn:example:ext")
        for metadata in ((), (("a2a-version", "0.3"),), (("a2a-version", "2.0"),), (("a2a-version", "1." + "9" * 40),),
                         V1):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(text_message("hello", "m-1"), metadata=metadata)
            code, message, reason = status_of(refused.value)
            headers = dict(metadata)
            expected = await dispatcher.dispatch(send_message_body("hello"), CallInfo(headers=headers))
            assert isinstance(expected, dict)
            assert message == expected["error"]["message"]
            # the A2A 1.0 error table: version -> UNIMPLEMENTED, extension required -> FAILED_PRECONDITION
            assert code == (grpc.StatusCode.FAILED_PRECONDITION if metadata == V1 else grpc.StatusCode.UNIMPLEMENTED)
            assert reason == ("EXTENSION_SUPPORT_REQUIRED" if metadata == V1 else "VERSION_NOT_SUPPORTED")
        task = (await stub.SendMessage(text_message("hello", "m-1"), metadata=(*V1, ext))).task
        assert task.status.state == INPUT_REQUIRED
        # The card stays reachable without the extension, as over JSON-RPC.
        assert (await stub.GetExtendedAgentCard(GetExtendedAgentCardRequest(), metadata=V1)).name


def test_protocol_error_is_exempt_only_for_the_card() -> None:
    required = frozenset({"urn:x"})
    assert protocol_error("GetExtendedAgentCard", {"a2a-version": "1.0.2"}, frozenset(), required) is None
    error = protocol_error("GetTask", {"a2a-version": "1.0"}, frozenset(), required)
    assert isinstance(error, ExtensionSupportRequiredError)


def test_every_rpc_goes_through_admission() -> None:
    served = {m for m in dir(a2a_pb2_grpc.A2AServiceServicer) if not m.startswith("_")}
    assert served == set(UNARY_METHODS) | set(STREAM_METHODS)
    for method in served:
        assert method in vars(KernelGrpcHandler)  # ours (admission first), not GrpcHandler's


async def test_unexpected_errors_are_internal_without_details(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    async with start_server(grpc_settings()) as server, grpc.aio.insecure_channel(server.url) as channel:
        async def boom(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("/home/secret/state.json exploded")

        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as invalid:
            await stub.GetTask(GetTaskRequest(id="bad id!"), metadata=V1)
        code, message, reason = status_of(invalid.value)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and reason == "INVALID_PARAMS" and "Invalid A2A id" in message

        monkeypatch.setattr(server.kernel.request_handler, "get_task_shared", boom)
        with caplog.at_level(logging.ERROR), pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.GetTask(GetTaskRequest(id="t-1"), metadata=V1)
        assert status_of(failed.value) == (grpc.StatusCode.INTERNAL, "Internal error", "INTERNAL_ERROR")
        assert "exploded" in caplog.text  # logged on the server, never sent


# --------------------------------------------------------------------------- TLS and binding


def self_signed(tmp_path: Path) -> tuple[Path, Path, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = tmp_path / "server.crt", tmp_path / "server.key"
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, cert_pem


async def test_tls(tmp_path: Path) -> None:
    cert_file, key_file, cert_pem = self_signed(tmp_path)
    settings = grpc_settings(**{"grpc-tls-cert": str(cert_file), "grpc-tls-key": str(key_file), "token": "t"})
    async with start_server(settings) as server:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert_pem)
        async with sdk_client(server, streaming=False,
                              channel=lambda url: grpc.aio.secure_channel(url, credentials)) as client:
            task = await send(client, text_message("hello", "m-tls"), auth("Bearer t"))
            assert task.status.state == INPUT_REQUIRED
        async with grpc.aio.insecure_channel(server.url) as plain:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await a2a_pb2_grpc.A2AServiceStub(plain).GetTask(GetTaskRequest(id=task.id), metadata=V1, timeout=5)
            assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_tls_settings_are_checked(tmp_path: Path) -> None:
    cert_file, key_file, _ = self_signed(tmp_path)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    for settings, message in (
            ({"grpc-tls-cert": str(cert_file)}, "needs both"),
            ({"grpc-tls-key": str(key_file)}, "needs both"),
            ({"grpc-tls-cert": str(tmp_path / "missing.crt"), "grpc-tls-key": str(key_file)}, "Cannot read the 'grpc-tls-cert'"),
            ({"grpc-tls-cert": str(garbage), "grpc-tls-key": str(key_file)}, "must be PEM"),
    ):
        kernel = make_kernel(grpc_settings(**settings))
        with pytest.raises(StartupError, match=message) as refused:
            await kernel.start()
        assert str(tmp_path) not in str(refused.value)
        await kernel.stop()


async def test_non_loopback_without_tls_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    kernel = make_kernel(grpc_settings(**{"grpc-host": "0.0.0.0"}))
    with pytest.raises(StartupError, match="grpc-insecure"):
        await kernel.start()
    await kernel.stop()

    with caplog.at_level(logging.WARNING):
        async with start_server(grpc_settings(**{"grpc-host": "0.0.0.0", "grpc-insecure": True})) as server:
            assert server.url.startswith("0.0.0.0:")
            port = server.url.rpartition(":")[2]
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                reply = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(text_message("hello", "m-1"), metadata=V1)
                assert reply.task.status.state == INPUT_REQUIRED
    assert "without TLS" in caplog.text


async def test_port_in_use_and_bad_port_are_startup_errors() -> None:
    async with start_server(grpc_settings()) as server:
        port = int(server.url.rpartition(":")[2])
        kernel = make_kernel(grpc_settings(**{"grpc-port": port}))
        with pytest.raises(StartupError, match="Cannot bind the gRPC transport"):
            await kernel.start()
        await kernel.stop()
    for bad in (True, -1, 70000):
        with pytest.raises(Exception, match="grpc"):
            make_kernel(grpc_settings(**{"grpc-port": bad}))
