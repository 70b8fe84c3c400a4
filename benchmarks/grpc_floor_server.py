"""The grpcio floor: the A2A gRPC service answering every call with a constant, no A2A logic at all.

``SendMessage`` returns one fixed completed task and ``GetTask`` one fixed task,
from a plain ``A2AServiceServicer`` on grpcio's asyncio server with uvloop (the
same stack as both measured servers). What it sustains is the most any server on
grpcio's asyncio server can reach on this machine with this load generator, so
``floor / reference`` bounds the ratio any gRPC implementation can show here.

    python benchmarks/grpc_floor_server.py --port 50071
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc

TASK = a2a_pb2.Task(id="floor", context_id="floor",
                    status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_COMPLETED))
SENT = a2a_pb2.SendMessageResponse(task=TASK)


class ConstantServicer(a2a_pb2_grpc.A2AServiceServicer):
    """Answers without reading the request: the cost left is grpcio's own."""

    async def SendMessage(self, request: Any, context: Any) -> a2a_pb2.SendMessageResponse:
        return SENT

    async def GetTask(self, request: Any, context: Any) -> a2a_pb2.Task:
        return TASK


async def serve(host: str, port: int) -> None:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(ConstantServicer(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50071)
    args = parser.parse_args()
    import uvloop

    uvloop.install()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
