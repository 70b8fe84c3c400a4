"""Bindings of ``a2a_jsonrpc.proto`` (the ``grpc-jsonrpc`` wire contract), built at import time.

No generated ``_pb2`` module is shipped: generated code pins the protobuf runtime it
was generated for (``ValidateProtobufRuntimeVersion``), and a runtime it does not
match refuses to import it. Here the file descriptor is assembled with the
installed runtime's own ``descriptor_pb2``, in a private descriptor pool (no
clash with any other registration of the same names), so the bindings can never
be missing or out of step with the runtime. The service is registered through
:func:`grpc.method_handlers_generic_handler` and called by method path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_FILE = "iac_code/a2a/transports/proto/a2a_jsonrpc.proto"
PACKAGE = "iac_code.a2a.transports.proto"
MESSAGE_NAME = "JsonRpcEnvelope"
SERVICE_NAME = f"{PACKAGE}.A2AJsonRpc"
SEND_PATH = f"/{SERVICE_NAME}/Send"
STREAM_PATH = f"/{SERVICE_NAME}/Stream"


def file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of ``a2a_jsonrpc.proto``."""
    field = descriptor_pb2.FieldDescriptorProto
    envelope_type = f".{PACKAGE}.{MESSAGE_NAME}"
    return descriptor_pb2.FileDescriptorProto(
        name=PROTO_FILE,
        package=PACKAGE,
        syntax="proto3",
        message_type=[descriptor_pb2.DescriptorProto(name=MESSAGE_NAME, field=[
            field(name="payload", number=1, type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL, json_name="payload"),
            field(name="final", number=2, type=field.TYPE_BOOL, label=field.LABEL_OPTIONAL, json_name="final"),
        ])],
        service=[descriptor_pb2.ServiceDescriptorProto(name="A2AJsonRpc", method=[
            descriptor_pb2.MethodDescriptorProto(name="Send", input_type=envelope_type, output_type=envelope_type),
            descriptor_pb2.MethodDescriptorProto(name="Stream", input_type=envelope_type, output_type=envelope_type,
                                                 server_streaming=True),
        ])],
    )


POOL = descriptor_pool.DescriptorPool()
FILE_DESCRIPTOR = POOL.Add(file_descriptor_proto())
ENVELOPE_DESCRIPTOR = POOL.FindMessageTypeByName(f"{PACKAGE}.{MESSAGE_NAME}")
SERVICE_DESCRIPTOR = POOL.FindServiceByName(SERVICE_NAME)
JsonRpcEnvelope: Any = message_factory.GetMessageClass(ENVELOPE_DESCRIPTOR)


def generic_handler(send: Callable[..., Any], stream: Callable[..., Any]) -> grpc.GenericRpcHandler:
    """The ``A2AJsonRpc`` service: ``send(envelope, context)`` (unary) and ``stream(envelope, context)``
    (server streaming; an async generator on an asyncio server)."""
    return grpc.method_handlers_generic_handler(SERVICE_NAME, {
        "Send": grpc.unary_unary_rpc_method_handler(
            send, request_deserializer=JsonRpcEnvelope.FromString, response_serializer=JsonRpcEnvelope.SerializeToString),
        "Stream": grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=JsonRpcEnvelope.FromString, response_serializer=JsonRpcEnvelope.SerializeToString),
    })
