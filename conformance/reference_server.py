"""a2a-sdk's own JSON-RPC app serving the conformance kit's agent: the yardstick.

A test of the kit that fails here as well as against iac-code points at the
kit (or at a2a-sdk), not at us; docs/conformance.md lists those. ``--handler``
picks a2a-sdk's ``DefaultRequestHandler`` (v2) or ``LegacyRequestHandler``.

    A2A_TCK_DIR=/tmp/a2a-tck uv run --group bench python conformance/reference_server.py --port 9998
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import uvicorn  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler, LegacyRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from tck_agent import TckAgentExecutor  # noqa: E402


def build_app(url: str, handler: str) -> Starlette:
    card = AgentCard(
        name="a2a-sdk reference (TCK agent)", description="a2a-sdk's JSON-RPC app with the TCK's agent",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text"], default_output_modes=["text"],
        skills=[AgentSkill(id="tck", name="TCK", description="TCK conformance", tags=["tck"])])
    handler_class = LegacyRequestHandler if handler == "legacy" else DefaultRequestHandler
    request_handler = handler_class(agent_executor=TckAgentExecutor(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(request_handler, rpc_url="/")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9998)
    parser.add_argument("--handler", choices=["default", "legacy"], default="legacy")
    args = parser.parse_args()
    uvicorn.run(build_app(f"http://{args.host}:{args.port}/", args.handler), host=args.host, port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
