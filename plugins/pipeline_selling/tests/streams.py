"""Readers of a pipeline turn as a2a-sdk's client streams it, shared by the selling pipelines' tests.

The conftest loads this module by its path (the tests run with --import-mode=importlib) before any test module and
registers it as ``pipeline_selling_test_streams``: a test module imports it by that name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from iac_code.testing import A2A_HEADERS

Event = dict[str, Any]
Send = Callable[..., Awaitable[list[Event]]]


def sender(prefix: str) -> Send:
    """``await send(client, request_or_text, *, n, context_id="", task_id="", iac_code=None)``: every streamed result of
    one turn as a dict. A text becomes a user message ``<prefix>-<n>`` (with ``metadata.iac_code`` when given); a
    ``SendMessageRequest`` (a permission answer, say) is sent as it is."""

    async def send(client: Any, request: SendMessageRequest | str, *, n: int, context_id: str = "", task_id: str = "",
                   iac_code: Event | None = None) -> list[Event]:
        if isinstance(request, str):
            message = Message(message_id=f"{prefix}-{n}", role=Role.ROLE_USER, parts=[Part(text=request)],
                              context_id=context_id, task_id=task_id)
            if iac_code:
                message.metadata.update({"iac_code": iac_code})
            request = SendMessageRequest(message=message)
        return [MessageToDict(e) async for e in client.send_message(request)]

    return send


def pipeline_events(results: list[Event]) -> list[Event]:
    """The pipeline events the status updates of a stream carried (single or batched), in order, each once."""
    found: list[Event] = []
    for result in results:
        section = result.get("statusUpdate", {}).get("metadata", {}).get("iac_code", {})
        for event in [section["pipeline"]] if "pipeline" in section else section.get("pipelineBatch", {}).get("events", []):
            if event not in found:
                found.append(event)
    return found


def last_status(results: list[Event]) -> Event:
    """The last status update of a stream."""
    return [r["statusUpdate"] for r in results if "statusUpdate" in r][-1]


async def state_of(url: str, context_id: str) -> Event:
    """The plugin's state endpoint (``/iac-code/pipeline/state``) for a context; it must answer 200."""
    async with aiohttp.ClientSession() as http, http.get(
            url.rstrip("/") + "/iac-code/pipeline/state", params={"contextId": context_id}, headers=A2A_HEADERS) as reply:
        assert reply.status == 200
        return await reply.json()  # type: ignore[no-any-return]
