"""A local stand-in for the Alibaba Cloud ROS API (RPC style), for end-to-end tests.

It answers the actions the ``aliyun_api`` tool uses and records every request,
so tests can check what reached "the cloud" without touching the internet.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class StandIn:
    endpoint: str = ""
    requests: list[dict[str, str]] = field(default_factory=list)
    stacks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def actions(self) -> list[str]:
        return [r.get("Action", "") for r in self.requests]


def _answer(state: StandIn, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
    action = params.get("Action", "")
    request_id = str(uuid.uuid4())
    if action == "CreateStack":
        stack_id = str(uuid.uuid4())
        state.stacks[stack_id] = {"StackId": stack_id, "StackName": params.get("StackName", ""),
                                  "Status": "CREATE_IN_PROGRESS"}
        return 200, {"RequestId": request_id, "StackId": stack_id}
    if action == "GetStack":
        stack = state.stacks.get(params.get("StackId", ""))
        if stack is None:
            return 404, {"RequestId": request_id, "Code": "StackNotFound", "Message": "The Stack does not exist."}
        return 200, {"RequestId": request_id, **stack}
    if action == "ListStacks":
        return 200, {"RequestId": request_id, "Stacks": list(state.stacks.values()), "TotalCount": len(state.stacks),
                     "PageNumber": 1, "PageSize": 10}
    if action in ("ValidateTemplate", "PreviewStack", "UpdateStack", "DeleteStack"):
        return 200, {"RequestId": request_id}
    return 400, {"RequestId": request_id, "Code": "InvalidAction.NotFound", "Message": "Unknown action"}


@asynccontextmanager
async def ros_standin() -> AsyncIterator[StandIn]:
    """Run the stand-in on 127.0.0.1 (ephemeral port); ``endpoint`` is ``host:port``."""
    state = StandIn()

    async def handle(request: web.Request) -> web.Response:
        params = dict(request.query)
        if request.can_read_body:
            params.update({k: str(v) for k, v in (await request.post()).items()})
        # The SDK signs with ACS3: the action travels in a header.
        params.setdefault("Action", request.headers.get("x-acs-action", ""))
        state.requests.append(params)
        status, body = _answer(state, params)
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.endpoint = f"127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()
