"""a2a-sdk's own Starlette JSON-RPC app serving a benchmark agent executor.

This is the *reference* the benchmark compares our server against. It is
deployed the way an expert would: uvicorn with uvloop + httptools, access
log off, log level warning, and a2a-sdk's OpenTelemetry wrappers disabled
(``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, which a2a-sdk reads once at
import time of ``a2a.utils.telemetry``, so it is set before importing a2a).

The executor is given by import path, like our server's ``agent-executor``
key (``package.module:attr``: a class or factory, called with no arguments, or
an instance); the default is ``trivial_agent:TrivialExecutor``.

Run standalone::

    python benchmarks/reference_server.py --port 8001
    python benchmarks/reference_server.py --port 8001 --executor one_update_agent:OneUpdateExecutor
"""

from __future__ import annotations

import os

# Must happen before any ``a2a`` import: a2a/utils/telemetry.py reads it at import.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import argparse  # noqa: E402
import importlib  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from a2a.server.agent_execution import AgentExecutor  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

DEFAULT_EXECUTOR = "trivial_agent:TrivialExecutor"


def load_executor(spec: str) -> AgentExecutor:
    """Resolve ``package.module:attr`` to an AgentExecutor (class/factory called, instance as is)."""
    bench_dir = str(Path(__file__).resolve().parent)
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"--executor must be 'package.module:attr', got {spec!r}")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    executor = obj if isinstance(obj, AgentExecutor) else obj()
    if not isinstance(executor, AgentExecutor):
        raise SystemExit(f"{spec} did not give an a2a-sdk AgentExecutor (got {type(executor).__name__})")
    return executor


def build_agent_card(url: str) -> AgentCard:
    """Return a minimal, spec-complete AgentCard (streaming, JSON-RPC)."""
    return AgentCard(
        name="bench-agent",
        description="Benchmark agent used for HTTP benchmarks.",
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
                description="Emits a fixed, tiny sequence of task events and completes.",
                tags=["bench"],
            )
        ],
    )


def build_reference_app(url: str = "http://127.0.0.1:8000/",
                        executor: str | AgentExecutor = DEFAULT_EXECUTOR) -> Starlette:
    """Build a2a-sdk's Starlette app (JSON-RPC at ``/`` + agent card) serving ``executor``."""
    from starlette.applications import Starlette

    card = build_agent_card(url)
    handler = DefaultRequestHandler(
        agent_executor=load_executor(executor) if isinstance(executor, str) else executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    from a2a.server.routes import create_rest_routes

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler),  # the HTTP+JSON binding beside JSON-RPC, as our server serves both
    ]
    return Starlette(routes=routes)


def main() -> None:
    """Serve the reference app with uvicorn (uvloop, httptools, no access log)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--executor", default=DEFAULT_EXECUTOR,
                        help="agent executor as 'package.module:attr' (benchmarks/ is importable)")
    args = parser.parse_args()
    app = build_reference_app(f"http://{args.host}:{args.port}/", args.executor)
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
