"""a2a-sdk's own Starlette JSON-RPC app serving ``TrivialExecutor``.

This is the *reference* the benchmark compares our server against. It is
deployed the way an expert would: uvicorn with uvloop + httptools, access
log off, log level warning, and a2a-sdk's OpenTelemetry wrappers disabled
(``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, which a2a-sdk reads once at
import time of ``a2a.utils.telemetry``, so it is set before importing a2a).

Run standalone::

    python benchmarks/reference_server.py --port 8001
"""

from __future__ import annotations

import os

# Must happen before any ``a2a`` import: a2a/utils/telemetry.py reads it at import.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import argparse  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
)
from trivial_agent import TrivialExecutor  # noqa: E402

if TYPE_CHECKING:
    from starlette.applications import Starlette


def build_agent_card(url: str) -> AgentCard:
    """Return a minimal, spec-complete AgentCard (streaming, JSON-RPC)."""
    return AgentCard(
        name="trivial-bench-agent",
        description="Trivial agent used for HTTP benchmarks.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="trivial",
                name="trivial",
                description="Emits a few status updates and completes.",
                tags=["bench"],
            )
        ],
    )


def build_reference_app(url: str = "http://127.0.0.1:8000/") -> Starlette:
    """Build a2a-sdk's Starlette app (JSON-RPC at ``/`` + agent card)."""
    from starlette.applications import Starlette

    card = build_agent_card(url)
    handler = DefaultRequestHandler(
        agent_executor=TrivialExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
    ]
    return Starlette(routes=routes)


def main() -> None:
    """Serve the reference app with uvicorn (uvloop, httptools, no access log)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    app = build_reference_app(f"http://{args.host}:{args.port}/")
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
