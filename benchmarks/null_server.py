"""A near-zero-cost canned A2A JSON-RPC server, for load-generator self-tests.

``bench_http.py --selftest`` points the load generator at this server to
show the generator's own ceiling: if it reaches many times the rates the
real servers reach, the generator is not the bottleneck. Responses are
canned but shaped like real ones so they pass the same validation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import cast

import httptools

TASK_ID = "00000000-0000-4000-8000-000000000000"
CTX_ID = "00000000-0000-4000-8000-000000000001"


def _task(state: str) -> dict[str, object]:
    return {"id": TASK_ID, "contextId": CTX_ID, "status": {"state": state}}


def _http(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


SEND = _http(json.dumps({"jsonrpc": "2.0", "id": "1", "result": {"task": _task("TASK_STATE_COMPLETED")}}).encode())
GET = _http(json.dumps({"jsonrpc": "2.0", "id": "3", "result": _task("TASK_STATE_COMPLETED")}).encode())


def _sse() -> bytes:
    events = [{"task": _task("TASK_STATE_SUBMITTED")}]
    for _ in range(5):
        events.append({"statusUpdate": {"taskId": TASK_ID, "contextId": CTX_ID,
                                        "status": {"state": "TASK_STATE_WORKING"}}})
    events.append({"statusUpdate": {"taskId": TASK_ID, "contextId": CTX_ID,
                                    "status": {"state": "TASK_STATE_COMPLETED"}}})
    out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    for ev in events:
        data = b"data: " + json.dumps({"jsonrpc": "2.0", "id": "2", "result": ev}).encode() + b"\r\n\r\n"
        out += f"{len(data):x}\r\n".encode() + data + b"\r\n"
    return out + b"0\r\n\r\n"


STREAM = _sse()


class _Proto(asyncio.Protocol):
    """Answers each parsed request with a canned response."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.body = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:  # noqa: D102
        self.parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        """Reset per-request state."""
        self.body = b""
        self.url = url

    def on_body(self, body: bytes) -> None:
        """Accumulate the request body."""
        self.body += body

    def on_message_complete(self) -> None:
        """Reply according to the JSON-RPC method named in the body."""
        assert self.transport is not None
        b = self.body
        if self.parser.get_method() == b"GET":
            self.transport.write(_http(b'{"status":"ok"}'))
        elif b"SendStreamingMessage" in b:
            self.transport.write(STREAM)
        elif b"GetTask" in b:
            self.transport.write(GET)
        else:
            self.transport.write(SEND)


async def _serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Proto, host, port)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Run the canned server until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(_serve(args.host, args.port))
    except ImportError:
        asyncio.run(_serve(args.host, args.port))


if __name__ == "__main__":
    main()
