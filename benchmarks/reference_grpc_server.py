"""a2a-sdk's own gRPC server serving a benchmark agent executor (the gRPC reference).

a2a-sdk's ``GrpcHandler`` over ``DefaultRequestHandler`` and ``InMemoryTaskStore``
on grpcio's asyncio server, with uvloop and a2a-sdk's OpenTelemetry wrappers
off, the way its documentation deploys it.

    python benchmarks/reference_grpc_server.py --port 50061 --executor trivial_agent:TrivialExecutor
"""

from __future__ import annotations

import os

os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import argparse  # noqa: E402
import asyncio  # noqa: E402

import grpc  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.request_handlers.grpc_handler import GrpcHandler  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types import a2a_pb2_grpc  # noqa: E402
from a2a.types.a2a_pb2 import AgentInterface  # noqa: E402
from reference_server import DEFAULT_EXECUTOR, build_agent_card, load_executor  # noqa: E402


async def serve(host: str, port: int, executor: str) -> None:
    card = build_agent_card(f"{host}:{port}")
    del card.supported_interfaces[:]
    card.supported_interfaces.append(AgentInterface(url=f"{host}:{port}", protocol_binding="GRPC",
                                                    protocol_version="1.0"))
    handler = DefaultRequestHandler(agent_executor=load_executor(executor), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(request_handler=handler), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"listening {host}:{port}", flush=True)
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50061)
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR)
    parser.add_argument("--no-uvloop", action="store_true", help="grpcio's default asyncio loop")
    args = parser.parse_args()
    if not args.no_uvloop:
        import uvloop

        uvloop.install()
    asyncio.run(serve(args.host, args.port, args.executor))


if __name__ == "__main__":
    main()
