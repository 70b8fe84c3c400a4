"""A local stand-in for Alibaba Cloud ROS: a real aiohttp HTTP server on 127.0.0.1 that speaks the ROS OpenAPI as
``alibabacloud-ros20190910`` calls it (POST ``/``, the action in ``x-acs-action`` or ``Action``, parameters in the
query and the form body, JSON answers shaped like ROS's).

It checks that a request names an AccessKey id (the signature is not verified), honours ``ClientToken`` like ROS
(the same token answers with the stack the first call created), refuses a second stack of a name that exists
(``StackExists``), and counts the stacks it created. A stack goes ``CREATE_IN_PROGRESS`` → its final status
(``CREATE_COMPLETE`` unless told otherwise) after ``polls`` GetStack calls, its resources one by one; ``hold``
keeps stacks in progress until released, ``gate_create`` keeps CreateStack from answering (the stack is already
created) until opened: what a test needs to kill a server at a chosen moment.

ContinueCreateStack: a ``CREATE_FAILED`` stack goes ``CREATE_IN_PROGRESS`` again and reaches ``continue_final_status``
after ``polls`` GetStack calls (any other status is refused, ``OperationDenied.InvalidStackStatus``);
``continuations`` counts the ones it started, ``gate_continue`` keeps the answer back as ``gate_create`` does. A stack
fails its creation with ``final_status = "CREATE_FAILED"`` (kept for ContinueCreateStack) or a rolled-back status.

DeleteStack: the stack goes ``DELETE_IN_PROGRESS`` → ``DELETE_COMPLETE`` (or ``delete_final_status``) after ``polls``
GetStack calls; the GetStack that sees ``DELETE_COMPLETE`` is the last to find it (then ``StackNotFound``, as ROS
forgets deleted stacks). ``deletions`` counts the deletions it started; DeleteStack of a stack already being deleted
is refused (``StackDeleteInProgress``, counted in ``calls`` only); ``hold_delete`` and ``gate_delete`` are the
deletion's ``hold`` and ``gate_create``.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

_CREDENTIAL = re.compile(r"Credential=([^,/\s]+)")


@dataclass
class FakeStack:
    stack_id: str
    name: str
    region: str
    token: str
    resources: list[tuple[str, str]]  # (logical id, type)
    parameters: dict[str, str]
    created_at: str
    polls: int = 0
    continued: bool = False  # ContinueCreateStack started it again: it ends in ``continue_final_status``
    status: str = "CREATE_IN_PROGRESS"
    reason: str = "Stack CREATE started"
    forgotten: bool = False  # deleted and reported DELETE_COMPLETE once: GetStack no longer finds it


@dataclass
class FakeRos:
    """The fake ROS service; ``await start()`` returns its endpoint (``http://127.0.0.1:<port>``)."""

    polls: int = 3
    final_status: str = "CREATE_COMPLETE"
    final_reason: str = "Stack CREATE completed successfully"
    stacks: dict[str, FakeStack] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    created: int = 0
    calls: list[str] = field(default_factory=list)
    key_ids: set[str] = field(default_factory=set)
    hold: bool = False
    gate_create: asyncio.Event | None = None
    gate_create_after: int = 0  # ``gate_create`` holds only the answers of creations after this many
    create_received: asyncio.Event = field(default_factory=asyncio.Event)
    polled: asyncio.Event = field(default_factory=asyncio.Event)
    continue_final_status: str = "CREATE_COMPLETE"
    continuations: int = 0
    gate_continue: asyncio.Event | None = None
    continue_received: asyncio.Event = field(default_factory=asyncio.Event)
    delete_final_status: str = "DELETE_COMPLETE"
    deletions: int = 0
    hold_delete: bool = False
    gate_delete: asyncio.Event | None = None
    delete_received: asyncio.Event = field(default_factory=asyncio.Event)
    delete_polled: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def add_stack(self, name: str, region: str = "cn-hangzhou") -> str:
        """A stack somebody else created (not counted in ``created``); its id."""
        stack_id = str(uuid.uuid4())
        self.stacks[stack_id] = FakeStack(stack_id, name, region, "", [], {},
                                          datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"), status="CREATE_COMPLETE")
        return stack_id

    def release(self) -> None:
        """Let held stacks reach their final status on their next poll (creations and deletions)."""
        self.hold = False
        self.hold_delete = False

    def alive(self) -> list[FakeStack]:
        """The stacks that exist (not deleted)."""
        return [s for s in self.stacks.values() if s.status != "DELETE_COMPLETE"]

    # ------------------------------------------------------------------ the wire

    @staticmethod
    def _error(status: int, code: str, message: str) -> web.Response:
        return web.json_response({"RequestId": str(uuid.uuid4()).upper(), "HostId": "ros.aliyuncs.com",
                                  "Code": code, "Message": message}, status=status)

    async def _handle(self, request: web.Request) -> web.Response:
        params: dict[str, str] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            params.update({k: str(v) for k, v in (await request.post()).items()})
        action = request.headers.get("x-acs-action") or params.get("Action", "")
        credential = _CREDENTIAL.search(request.headers.get("Authorization", ""))
        key_id = credential.group(1) if credential else params.get("AccessKeyId", "")
        if not key_id:
            return self._error(400, "MissingAccessKeyId", "AccessKeyId is mandatory for this action.")
        self.key_ids.add(key_id)
        self.calls.append(action)
        handler = {"CreateStack": self._create, "GetStack": self._get, "ListStackResources": self._resources,
                   "ListStackEvents": self._events, "ListStacks": self._list, "DeleteStack": self._delete,
                   "ContinueCreateStack": self._continue}.get(action)
        if handler is None:
            return self._error(404, "InvalidAction.NotFound", f"Specified api is not found, please check your url "
                                                             f"and method. Action: {action}")
        return await handler(params)

    def _request_id(self) -> str:
        return str(uuid.uuid4()).upper()

    async def _create(self, params: dict[str, str]) -> web.Response:
        for required in ("StackName", "RegionId"):
            if not params.get(required):
                return self._error(400, "MissingParameter", f"The input parameter \"{required}\" that is mandatory "
                                                            "for processing this request is not supplied.")
        if not params.get("TemplateBody"):
            return self._error(400, "InvalidTemplate", "The template body is empty.")
        self.create_received.set()
        token = params.get("ClientToken", "")
        if token and token in self.tokens:
            stack_id = self.tokens[token]
        elif any(s.name == params["StackName"] and not s.status.startswith("DELETE") for s in self.stacks.values()):
            return self._error(409, "StackExists", f"The Stack ({params['StackName']}) already exists.")
        else:
            try:
                document = json.loads(params["TemplateBody"])
            except ValueError:
                document = yaml.safe_load(params["TemplateBody"])
            resources = [(str(k), str(v.get("Type", ""))) for k, v in (document.get("Resources") or {}).items()
                         if isinstance(v, dict)]
            parameters = {params[k]: params.get(k.replace("ParameterKey", "ParameterValue"), "")
                          for k in params if re.fullmatch(r"Parameters\.\d+\.ParameterKey", k)}
            stack_id = str(uuid.uuid4())
            self.stacks[stack_id] = FakeStack(stack_id, params["StackName"], params["RegionId"], token, resources,
                                              parameters, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"))
            if token:
                self.tokens[token] = stack_id
            self.created += 1
        if self.gate_create is not None and self.created > self.gate_create_after:
            await self.gate_create.wait()  # the stack exists; the answer waits (a test kills its caller meanwhile)
        return web.json_response({"RequestId": self._request_id(), "StackId": stack_id})

    def _stack(self, params: dict[str, str]) -> FakeStack | None:
        return self.stacks.get(params.get("StackId", ""))

    def _done(self, stack: FakeStack) -> int:
        """How many of the stack's resources are created by now."""
        if stack.status == "CREATE_COMPLETE":
            return len(stack.resources)
        return min(len(stack.resources), len(stack.resources) * stack.polls // max(1, self.polls + 1))

    @staticmethod
    def _not_found(stack_id: str) -> web.Response:
        return FakeRos._error(404, "StackNotFound", f"The Stack ({stack_id}) could not be found.")

    async def _delete(self, params: dict[str, str]) -> web.Response:
        stack = self._stack(params)
        if stack is None or stack.status == "DELETE_COMPLETE" or stack.forgotten:
            return self._not_found(params.get("StackId", ""))
        self.delete_received.set()
        if stack.status == "DELETE_IN_PROGRESS":
            return self._error(409, "StackDeleteInProgress", f"The Stack ({stack.stack_id}) is being deleted.")
        stack.status, stack.reason, stack.polls = "DELETE_IN_PROGRESS", "Stack DELETE started", 0
        self.deletions += 1
        if self.gate_delete is not None:
            await self.gate_delete.wait()  # the deletion started; the answer waits (a test kills its caller)
        return web.json_response({"RequestId": self._request_id()})

    async def _continue(self, params: dict[str, str]) -> web.Response:
        stack = self._stack(params)
        if stack is None or stack.forgotten or stack.status == "DELETE_COMPLETE":
            return self._not_found(params.get("StackId", ""))
        self.continue_received.set()
        if stack.status != "CREATE_FAILED":
            return self._error(409, "OperationDenied.InvalidStackStatus",
                               f"The Stack ({stack.stack_id}) status ({stack.status}) is not allowed for this operation.")
        stack.status, stack.reason, stack.polls, stack.continued = "CREATE_IN_PROGRESS", "Stack CREATE continued", 0, True
        self.continuations += 1
        if self.gate_continue is not None:
            await self.gate_continue.wait()  # the continuation started; the answer waits (a test kills its caller)
        return web.json_response({"RequestId": self._request_id(), "StackId": stack.stack_id})

    async def _get(self, params: dict[str, str]) -> web.Response:
        stack = self._stack(params)
        if stack is None or stack.forgotten:
            return self._not_found(params.get("StackId", ""))
        if stack.status == "DELETE_COMPLETE":
            stack.forgotten = True  # reported once, then ROS no longer knows it
        if stack.status == "DELETE_IN_PROGRESS":
            stack.polls += 1
            self.delete_polled.set()
            if stack.polls >= self.polls and not self.hold_delete:
                stack.status = self.delete_final_status
                stack.reason = ("Stack DELETE completed successfully" if stack.status == "DELETE_COMPLETE"
                                else "Resource [Vpc] failed: DependencyViolation")
        if stack.status == "CREATE_IN_PROGRESS":
            stack.polls += 1
            if stack.polls >= self.polls and not self.hold:
                if stack.continued:
                    stack.status, stack.reason = self.continue_final_status, "Stack CREATE completed successfully"
                else:
                    stack.status, stack.reason = self.final_status, self.final_reason
        self.polled.set()
        progress = 100.0 if stack.status in ("CREATE_COMPLETE", "DELETE_COMPLETE") else round(100.0 * self._done(stack) / max(1, len(stack.resources)), 2)
        body: dict[str, Any] = {
            "RequestId": self._request_id(), "StackId": stack.stack_id, "StackName": stack.name,
            "RegionId": stack.region, "Status": stack.status, "StatusReason": stack.reason,
            "CreateTime": stack.created_at, "DisableRollback": False, "TimeoutInMinutes": 60,
            "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in stack.parameters.items()],
            "Outputs": [{"OutputKey": "StackName", "OutputValue": stack.name, "Description": "The stack's name"}]
            if stack.status == "CREATE_COMPLETE" else []}
        if params.get("ShowResourceProgress") == "PercentageOnly":
            body["ResourceProgress"] = {"StackOperationProgress": progress, "StackActionProgress": progress}
        return web.json_response(body)

    def _resource_rows(self, stack: FakeStack) -> list[dict[str, Any]]:
        done = self._done(stack)
        failed = stack.status != "CREATE_IN_PROGRESS" and stack.status != "CREATE_COMPLETE"
        rows = []
        for i, (logical, kind) in enumerate(stack.resources):
            status = "CREATE_COMPLETE" if i < done else ("CREATE_FAILED" if failed and i == done else "CREATE_IN_PROGRESS")
            row = {"LogicalResourceId": logical, "ResourceType": kind, "Status": status, "StackId": stack.stack_id,
                   "StackName": stack.name, "StatusReason": f"state changed to {status}",
                   "CreateTime": stack.created_at, "UpdateTime": stack.created_at}
            if status == "CREATE_COMPLETE":
                row["PhysicalResourceId"] = f"{kind.split('::')[-1].lower()}-{stack.stack_id[:8]}-{i}"
            rows.append(row)
        return rows

    async def _resources(self, params: dict[str, str]) -> web.Response:
        stack = self._stack(params)
        if stack is None:
            return self._error(404, "StackNotFound", f"The Stack ({params.get('StackId', '')}) could not be found.")
        return web.json_response({"RequestId": self._request_id(), "Resources": self._resource_rows(stack)})

    async def _events(self, params: dict[str, str]) -> web.Response:
        stack = self._stack(params)
        if stack is None:
            return self._error(404, "StackNotFound", f"The Stack ({params.get('StackId', '')}) could not be found.")
        events = [{"EventId": str(uuid.uuid5(uuid.NAMESPACE_OID, stack.stack_id + r["LogicalResourceId"] + r["Status"])),
                   "LogicalResourceId": r["LogicalResourceId"], "ResourceType": r["ResourceType"],
                   "Status": r["Status"], "StatusReason": r["StatusReason"], "StackId": stack.stack_id,
                   "StackName": stack.name, "CreateTime": stack.created_at} for r in self._resource_rows(stack)]
        return web.json_response({"RequestId": self._request_id(), "Events": events, "PageNumber": 1,
                                  "PageSize": 50, "TotalCount": len(events)})

    async def _list(self, params: dict[str, str]) -> web.Response:
        names = {v for k, v in params.items() if re.fullmatch(r"StackName\.\d+", k)}
        stacks = [{"StackId": s.stack_id, "StackName": s.name, "RegionId": s.region, "Status": s.status,
                   "StatusReason": s.reason, "CreateTime": s.created_at}
                  for s in self.stacks.values() if not names or s.name in names]
        return web.json_response({"RequestId": self._request_id(), "Stacks": stacks, "PageNumber": 1,
                                  "PageSize": 50, "TotalCount": len(stacks)})
