"""The ``grpc-jsonrpc`` transport (JSON-RPC envelopes over gRPC) against a real server."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf import descriptor_pb2
from iac_code_transport_grpc import a2a_jsonrpc_bindings as bindings
from iac_code_transport_grpc.jsonrpc_client import GrpcJsonRpcClient
from iac_code_transport_grpc.jsonrpc_envelope import SHARED_DEFAULT_PORT, USE_STREAM, jsonrpc_port

from iac_code.api import TOO_LARGE, jsonio
from iac_code.testing import RunningServer, make_kernel, permission_envelope, send_message_body, start_server

VPC_PROMPT = "Create a VPC with two vSwitches."
V1 = {"A2A-Version": "1.0"}
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
PROTO = Path(bindings.__file__).with_name("a2a_jsonrpc.proto")


def settings(**extra: Any) -> dict[str, Any]:
    return {"transport": ["grpc-jsonrpc"], "grpc-jsonrpc-port": 0, **extra}


def rpc(method: str, params: dict[str, Any], request_id: str | int = "r1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def target(server: RunningServer) -> str:
    [interface] = [i for i in server.kernel.cards.card.supported_interfaces if i.protocol_binding == "grpc-jsonrpc"]
    return interface.url


@asynccontextmanager
async def serving(**extra: Any) -> AsyncIterator[tuple[RunningServer, GrpcJsonRpcClient]]:
    async with start_server(settings(**extra)) as server:
        client = GrpcJsonRpcClient(target(server), metadata=(("A2A-Version", "1.0"),))
        try:
            yield server, client
        finally:
            await client.aclose()


async def raw_stream(address: str, payload: bytes, metadata: tuple[tuple[str, str], ...] = (
        ("a2a-version", "1.0"),)) -> list[tuple[dict[str, Any], bool]]:
    """Every envelope of one ``Stream`` call as (decoded payload, final flag)."""
    async with grpc.aio.insecure_channel(address.removeprefix("grpc-jsonrpc://")) as channel:
        call = channel.unary_stream(bindings.STREAM_PATH, request_serializer=bindings.JsonRpcEnvelope.SerializeToString,
                                    response_deserializer=bindings.JsonRpcEnvelope.FromString)
        return [(jsonio.loads(m.payload), m.final) async for m in call(bindings.JsonRpcEnvelope(payload=payload),
                                                                        metadata=metadata)]


async def raw_send(address: str, payload: bytes, metadata: tuple[tuple[str, str], ...] = (
        ("a2a-version", "1.0"),)) -> tuple[dict[str, Any], bool]:
    """One ``Send`` call as (decoded payload, final flag)."""
    async with grpc.aio.insecure_channel(address.removeprefix("grpc-jsonrpc://")) as channel:
        call = channel.unary_unary(bindings.SEND_PATH, request_serializer=bindings.JsonRpcEnvelope.SerializeToString,
                                   response_deserializer=bindings.JsonRpcEnvelope.FromString)
        reply = await call(bindings.JsonRpcEnvelope(payload=payload), metadata=metadata)
        return jsonio.loads(reply.payload), reply.final


# --------------------------------------------------------------------------- the wire contract


def test_shipped_proto_and_bindings_agree() -> None:
    text = re.sub(r"//[^\n]*", "", PROTO.read_text())
    fd = descriptor_pb2.FileDescriptorProto()
    bindings.FILE_DESCRIPTOR.CopyToProto(fd)
    assert re.search(r'syntax\s*=\s*"proto3"\s*;', text) and fd.syntax == "proto3"
    assert re.search(r"package\s+([\w.]+)\s*;", text)[1] == fd.package == "iac_code.a2a.transports.proto"

    type_names = {"bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
                  "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL}
    messages = {m[1]: [(f[1], f[2], int(f[3])) for f in re.finditer(r"(\w+)\s+(\w+)\s*=\s*(\d+)\s*;", m[2])]
                for m in re.finditer(r"message\s+(\w+)\s*\{([^}]*)\}", text)}
    assert messages == {m.name: [(next(k for k, v in type_names.items() if v == f.type), f.name, f.number)
                                 for f in m.field] for m in fd.message_type}
    assert messages == {"JsonRpcEnvelope": [("bytes", "payload", 1), ("bool", "final", 2)]}

    [service_text] = re.findall(r"service\s+(\w+)\s*\{(.*?)\n\}", text, re.S)
    methods = [(m[1], m[2], bool(m[3]), m[4]) for m in
               re.finditer(r"rpc\s+(\w+)\s*\(\s*(\w+)\s*\)\s*returns\s*\(\s*(stream\s+)?(\w+)\s*\)", service_text[1])]
    [service] = fd.service
    assert service_text[0] == service.name == "A2AJsonRpc"
    assert methods == [(m.name, m.input_type.rsplit(".", 1)[1], m.server_streaming, m.output_type.rsplit(".", 1)[1])
                       for m in service.method]
    assert methods == [("Send", "JsonRpcEnvelope", False, "JsonRpcEnvelope"),
                       ("Stream", "JsonRpcEnvelope", True, "JsonRpcEnvelope")]
    assert bindings.SEND_PATH == "/iac_code.a2a.transports.proto.A2AJsonRpc/Send"
    # The wire bytes of proto3 fields 1 (bytes) and 2 (bool).
    assert bindings.JsonRpcEnvelope(payload=b"{}", final=True).SerializeToString() == b"\x0a\x02{}\x10\x01"


def test_port_resolution() -> None:
    assert jsonrpc_port(make_kernel({"transport": ["grpc-jsonrpc"], "grpc-port": 6001})) == 6001
    assert jsonrpc_port(make_kernel({"transport": ["grpc+jsonrpc", "grpc"]})) == SHARED_DEFAULT_PORT
    assert jsonrpc_port(make_kernel({"transport": ["grpc", "grpc-jsonrpc"], "grpc-jsonrpc-port": 6002})) == 6002


# --------------------------------------------------------------------------- the A2A methods


async def test_send_get_list_cancel() -> None:
    async with serving() as (server, client):
        [interface] = server.kernel.cards.card.supported_interfaces
        assert interface.protocol_binding == "grpc-jsonrpc" and interface.protocol_version == "1.0"
        assert interface.url.startswith("grpc-jsonrpc://127.0.0.1:") and not interface.url.endswith(":0")

        reply = await client.request(send_message_body("hello", request_id=7))
        assert reply["id"] == 7
        task = reply["result"]["task"]
        assert task["status"]["state"] == INPUT_REQUIRED

        fetched = await client.request(rpc("GetTask", {"id": task["id"]}))
        assert fetched["id"] == "r1" and fetched["result"]["id"] == task["id"]
        listed = await client.request(rpc("ListTasks", {}))
        assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
        missing = await client.request(rpc("GetTask", {"id": "no-such-task"}))
        assert missing["error"]["code"] == -32001

        not_cancelable = await client.request(rpc("CancelTask", {"id": task["id"]}))
        assert "error" in not_cancelable
        paused = (await client.request(send_message_body(VPC_PROMPT, message_id="m-vpc", contextId="ctx-vpc")))
        paused_task = paused["result"]["task"]
        assert permission_envelope(paused_task) is not None
        canceled = await client.request(rpc("CancelTask", {"id": paused_task["id"]}))
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_stream_send_streaming_message() -> None:
    async with serving() as (server, client):
        body = send_message_body("hello", method="SendStreamingMessage", request_id="s1")
        envelopes = await raw_stream(target(server), jsonio.dumps(body))
        *events, (terminator, final) = envelopes
        assert final and terminator == {"jsonrpc": "2.0", "id": "s1", "final": True}
        assert events and not any(flag for _, flag in events)
        assert all(e["id"] == "s1" and "result" in e for e, _ in events)
        assert "task" in events[0][0]["result"]
        assert events[-1][0]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED

        # The client yields the events, not the terminator.
        frames = [f async for f in client.stream(send_message_body("hello", method="SendStreamingMessage",
                                                                   message_id="m-2"))]
        assert frames and all("result" in f for f in frames)
        assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED


async def test_stream_subscribe_to_paused_task_and_unary_methods() -> None:
    async with serving() as (server, client):
        paused = (await client.request(send_message_body(VPC_PROMPT, message_id="m-vpc", contextId="ctx-1")))["result"]["task"]
        assert paused["status"]["state"] == INPUT_REQUIRED
        envelopes = await raw_stream(target(server), jsonio.dumps(rpc("SubscribeToTask", {"id": paused["id"]}, "sub")))
        assert [(e["result"]["task"]["status"]["state"], f) for e, f in envelopes[:-1]] == [(INPUT_REQUIRED, False)]
        assert envelopes[-1] == ({"jsonrpc": "2.0", "id": "sub", "final": True}, True)

        # Stream of a unary method: its answer in one final envelope.
        [(answer, final)] = await raw_stream(target(server), jsonio.dumps(rpc("GetTask", {"id": paused["id"]}, 3)))
        assert final and answer["id"] == 3 and answer["result"]["id"] == paused["id"]
        assert [f async for f in client.stream(rpc("GetTask", {"id": paused["id"]}))][0]["result"]["id"] == paused["id"]

        # An error before the first event: one final error envelope (the client yields it).
        [(error, final)] = await raw_stream(target(server), jsonio.dumps(rpc("SubscribeToTask", {"id": "nope"}, "x")))
        assert final and error["id"] == "x" and error["error"]["code"] == -32001
        [frame] = [f async for f in client.stream(rpc("SubscribeToTask", {"id": "nope"}))]
        assert frame["error"]["code"] == -32001


async def test_send_of_a_streaming_method_is_refused_without_dispatch() -> None:
    async with serving() as (_, client):
        for method in ("SendStreamingMessage", "SubscribeToTask"):
            reply = await client.request(send_message_body("hello", method=method, request_id="q"))
            assert reply == {"jsonrpc": "2.0", "id": "q", "error": USE_STREAM}
        assert (await client.request(rpc("ListTasks", {})))["result"]["tasks"] == []


async def test_bad_and_oversized_payloads() -> None:
    async with serving(**{"max-request-bytes": 4096}) as (server, client):
        address = target(server)
        for payload in (b"[1, 2]", b'"text"', b"not json", b"\xff\xfe", b""):
            reply, final = await raw_send(address, payload)
            assert not final and reply["jsonrpc"] == "2.0" and reply["id"] is None
            assert reply["error"]["code"] in (-32600, -32700), payload
            [(streamed, final)] = await raw_stream(address, payload)
            assert final and streamed == reply

        big = jsonio.dumps(send_message_body("x" * 4200))
        assert 4096 < len(big) < 4096 + 1000
        assert await raw_send(address, big) == ({"jsonrpc": "2.0", "id": None, "error": TOO_LARGE}, False)
        assert await raw_stream(address, big) == [({"jsonrpc": "2.0", "id": None, "error": TOO_LARGE}, True)]
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # beyond the envelope limit: grpcio refuses it
            await raw_send(address, b" " * 10_000)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "result" in await client.request(rpc("ListTasks", {}))


async def test_auth_from_metadata() -> None:
    async with serving(token="s3cret") as (server, client):
        address = target(server)
        body = jsonio.dumps(send_message_body("hello"))
        for metadata in ((("a2a-version", "1.0"),), (("a2a-version", "1.0"), ("authorization", "Bearer wrong"))):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await raw_send(address, body, metadata)
            assert (refused.value.code(), refused.value.details()) == (grpc.StatusCode.UNAUTHENTICATED, "Unauthorized")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await raw_stream(address, body, metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        reply = await client.request(send_message_body("hello"), headers={"Authorization": "Bearer s3cret"})
        assert reply["result"]["task"]["status"]["state"] == INPUT_REQUIRED
        authed = GrpcJsonRpcClient(address, metadata=(("authorization", "Bearer s3cret"), ("a2a-version", "1.0")))
        try:
            listed = await authed.request(rpc("ListTasks", {}))
            assert [t["id"] for t in listed["result"]["tasks"]] == [reply["result"]["task"]["id"]]
            frames = [f async for f in authed.stream(send_message_body("hello", method="SendStreamingMessage",
                                                                       message_id="m-s"))]
            assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED
        finally:
            await authed.aclose()
        # The frame's own "headers" member authenticates too (serve_frame merges it over the metadata).
        framed = {**send_message_body("hello", message_id="m-h"), "headers": {"Authorization": "Bearer s3cret"}}
        assert "result" in await client.request(framed)


async def test_both_grpc_transports_in_one_process() -> None:
    both = {"transport": ["grpc", "grpc-jsonrpc"], "grpc-port": 0, "grpc-jsonrpc-port": 0}
    async with start_server(both) as server:
        interfaces = server.kernel.cards.card.supported_interfaces
        assert [i.protocol_binding for i in interfaces] == ["GRPC", "grpc-jsonrpc"]
        client = GrpcJsonRpcClient(interfaces[1].url, metadata=(("a2a-version", "1.0"),))
        try:
            task = (await client.request(send_message_body("hello")))["result"]["task"]
        finally:
            await client.aclose()
        async with grpc.aio.insecure_channel(interfaces[0].url) as channel:
            fetched = await a2a_pb2_grpc.A2AServiceStub(channel).GetTask(
                a2a_pb2.GetTaskRequest(id=task["id"]), metadata=(("a2a-version", "1.0"),))
        assert fetched.id == task["id"] and fetched.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED


async def test_client_cancel_mid_stream_keeps_serving_and_the_turn_runs() -> None:
    async with serving() as (_, client):
        stream = client.stream(send_message_body("hello", method="SendStreamingMessage", message_id="m-c"))
        first = await anext(stream)
        task_id = first["result"]["task"]["id"]
        await stream.aclose()  # cancels the call
        state = ""
        for _ in range(100):  # the turn is not canceled: it still reaches its end
            state = (await client.request(rpc("GetTask", {"id": task_id})))["result"]["status"]["state"]
            if state == INPUT_REQUIRED:
                break
            await asyncio.sleep(0.05)
        assert state == INPUT_REQUIRED
        assert (await client.request(send_message_body("hello", message_id="m-after")))["result"]["task"]
