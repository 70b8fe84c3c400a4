"""The ``deploying`` step with ``deployer: ros``: the caller's permission, then CreateStack and GetStack polling
until the stack's final status (since-0.13 §2.1, §2.2, §2.5, §6).

1. **Permission, always.** The step journals ``permission_requested`` (``permission``: the kernel's own permission
   envelope for the request, with the §6 ``operation``) and yields a :class:`PermissionRequest` for the tool
   ``ros_deploy`` (``is_read_only=False``: a cloud change). The kernel decides: its rules (only a rule naming
   ``ros_deploy`` exactly allows it; auto-approval never does), else it asks the caller and the task waits in
   INPUT_REQUIRED for the usual permission answer. ``permission_resolved`` says the decision. A deny (or no
   answer in time) ends the step ``cancelled`` with nothing created, then ``pipeline_canceled`` and the handoff.
2. **Exactly once.** Before CreateStack the run's state records the deploy as ``creating`` with its ClientToken
   (derived from the run id, the candidate, the stack name, the region and the template) and stack name; after,
   the stack id (``created``). A resume after a crash never asks ROS for a second stack: with a stack id it polls
   that stack; while ``creating`` it sends CreateStack again with the same ClientToken (ROS answers with the stack
   the first call made), and if ROS says the name is taken it adopts the stack of that name created since. A
   deploy that reached a final status is never repeated: its recorded outcome is published again instead.
3. **Progress.** ``stack_progress`` (scope ``stack``) whenever the stack's status, progress or resources change:
   ``{"toolUseId","stackId","stackName","regionId","status","progressPercentage","resources","elapsedSeconds"}``.
   ``CREATE_COMPLETE`` completes the step with its ``deployment`` conclusion (``status: "success"``); any other
   final status, a ROS error or the wait running out fails it (``step_failed``, ``pipeline_failed``) with the
   sanitised reason. Every text that leaves here went through :func:`~.ros_client.sanitise`.
4. **The next attempt.** A stack that ends ``CREATE_FAILED`` (kept for ROS to go on) or rolled back
   (``CREATE_ROLLBACK_COMPLETE``, ``ROLLBACK_COMPLETE``, ``*ROLLBACK_FAILED``), or one still ``CREATE_IN_PROGRESS``
   when the wait runs out, does not end the step at once: the step asks again (a new ``ros_deploy`` question, at
   most :data:`MAX_RETRIES` times a run) for the action that fits the stack (§6 ``operation.action``):
   ``continue_create`` (ContinueCreateStack, then GetStack polling), ``delete_and_create`` (DeleteStack, GetStack
   until it is gone, then CreateStack with a new ClientToken) or ``wait`` (GetStack polling only). An allow runs it
   exactly once like a create: the phase (``continuing``, ``deleting``, ``creating``) is recorded before the call, and
   a resume asks GetStack whether ROS heard it before sending it again. A deny calls nothing and fails the step
   with the stack's failure.
5. **The current stack.** Once ROS has a stack for the run (whatever its final status), ``stack_current_changed``
   (scope ``stack``, ``action: "create"``, ``current: true``) says it is the context's current stack, the one a
   ``cleanupOnly`` continuation removes (:mod:`.cleanup`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iac_code.api import PermissionRequest, permission_envelope
from iac_code_pipeline_selling.deploy_config import DEFAULT_REGION, RosSettings
from iac_code_pipeline_selling.ros_client import (
    DELETED_STATUS,
    NOT_FOUND,
    SUCCESS_STATUS,
    RosClient,
    RosError,
    StackInfo,
    sanitise,
)

if TYPE_CHECKING:
    from iac_code_pipeline_selling.runner import PipelineRuntime, RunTurn

logger = logging.getLogger(__name__)

TOOL_NAME = "ros_deploy"
FRAME_KIND = "pipeline_permission"  # the continuation frame of a pipeline's durable permission question
CREATE_ATTEMPTS = 5  # CreateStack calls without an answer (network errors) before the deploy fails
STACK_EXISTS = "StackExists"
MAX_RETRIES = 3  # further attempts (continue_create, delete_and_create, wait) one run asks for at most
CONTINUABLE = ("CREATE_FAILED",)  # ROS goes on creating such a stack (ContinueCreateStack)
REPLACEABLE = ("CREATE_ROLLBACK_COMPLETE", "ROLLBACK_COMPLETE", "CREATE_ROLLBACK_FAILED", "ROLLBACK_FAILED")
POLLING = {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}
API_CALLS: dict[str, tuple[dict[str, str], ...]] = {  # since-0.13 §6: ros_deploy's actions and their ROS calls
    "create": ({"product": "ROS", "action": "CreateStack", "effect": "change"}, POLLING),
    "continue_create": ({"product": "ROS", "action": "ContinueCreateStack", "effect": "change"}, POLLING),
    "wait": (POLLING,),
    "delete_and_create": ({"product": "ROS", "action": "DeleteStack", "effect": "change"},
                          {"product": "ROS", "action": "CreateStack", "effect": "change"}, POLLING),
}
SUMMARY_ACTIONS = {"create": "CreateStack", "continue_create": "ContinueCreateStack", "wait": "GetStack",
                   "delete_and_create": "DeleteStack+CreateStack"}
ACTING_PHASES = ("allowed", "continuing", "deleting", "replaced", "creating", "created")
ADOPT_SLACK_SECONDS = 300  # a stack of our name created this long before our CreateStack is still ours (clock skew)

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "deployed": "Deployed “{name}”: stack {stack} ({stack_id}) in {region} is CREATE_COMPLETE.",
        "stack_failed": "The deployment of “{name}” failed: stack {stack} ({stack_id}) is {status}. {reason}",
        "ros_error": "The deployment of “{name}” failed: ROS answered {code}: {reason}",
        "timeout": "The deployment of “{name}” was not finished after {seconds} seconds: stack {stack} ({stack_id}) "
                   "is still {status}. Look at it in the ROS console.",
        "denied": "The deployment of “{name}” was not allowed, so nothing was deployed. Its template is stored as the "
                  "task artifact {artifact} (task {task}).",
        "no_template": "The template of “{name}” ({artifact}) is no longer available, so nothing was deployed.",
        "no_credentials": "No Alibaba Cloud credentials are configured, so nothing was deployed.",
    },
    "zh": {
        "deployed": "已部署“{name}”：资源栈 {stack}（{stack_id}，地域 {region}）状态为 CREATE_COMPLETE。",
        "stack_failed": "“{name}”部署失败：资源栈 {stack}（{stack_id}）状态为 {status}。{reason}",
        "ros_error": "“{name}”部署失败：ROS 返回 {code}：{reason}",
        "timeout": "“{name}”在 {seconds} 秒内未完成部署：资源栈 {stack}（{stack_id}）仍为 {status}，请在 ROS 控制台查看。",
        "denied": "未获准部署“{name}”，因此没有部署任何资源。模板已保存为任务产物 {artifact}（任务 {task}）。",
        "no_template": "“{name}”的模板（{artifact}）已不可用，因此没有部署任何资源。",
        "no_credentials": "未配置阿里云凭证，因此没有部署任何资源。",
    },
}


def say(language: str, key: str, **values: Any) -> str:
    """The deploy sentence ``key`` in ``language`` (English when not translated)."""
    return TEXTS.get(language, TEXTS["en"]).get(key, TEXTS["en"][key]).format(**values)


@dataclass(frozen=True)
class DeployPlan:
    """What a pipeline deploys: the chosen candidate, its stored template, where and how.

    ``template`` is the pipeline's template record (``filename``, ``sha256``, ``task_id``; ``artifact_id`` when the
    kernel reported it); ``parameters`` the template parameters' values; ``cost`` the cost conclusion (shown in the
    permission's deployment summary); ``conclusion`` the pipeline's own fields of the ``deployment`` conclusion."""

    candidate_name: str
    candidate_index: int
    template: Mapping[str, Any]
    region_id: str
    stack_name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    cost: Mapping[str, Any] = field(default_factory=dict)
    conclusion: Mapping[str, Any] = field(default_factory=dict)


def client_token(run_id: str, plan: DeployPlan, attempt: int = 0) -> str:
    """The ClientToken of a deploy: the same run, candidate, stack, region and template (and attempt: a
    ``delete_and_create`` creates anew) give the same token, so a CreateStack sent again (a resume, a retry) is the
    same request to ROS (at most 64 ASCII characters)."""
    parts = (run_id, str(plan.candidate_index), plan.stack_name, plan.region_id, str(plan.template["sha256"]))
    seed = "\n".join(parts + ((str(attempt),) if attempt else ()))
    return "iac-code-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:48]


def new_hex() -> str:
    """32 random hex digits."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Decided:
    """The caller's (or a rule's) decision on a permission a pipeline asked: the ``permission_resolved`` data
    without ``kind`` (``resolved``) and whether it allows the call."""

    allowed: bool
    resolved: Mapping[str, Any]
    decided_by: str


def continuation(run: RunTurn, operation: str, tool_use_id: str, input_id: str, **more: Any) -> dict[str, Any]:
    """The continuation frame of a pipeline's permission question (``operation``: ``deploy`` or ``cleanup``): what
    :meth:`~.runner.PipelineRuntime.resume_turn` needs to find the paused question in the run's state again. The
    kernel writes it into the question's durable checkpoint (since-0.13 §4) before the question is published."""
    return {"kind": FRAME_KIND, "operation": operation, "pipelineName": run.layout.name,
            "pipelineRunId": str(run.state["pipelineRunId"]), "toolUseId": tool_use_id, "inputId": input_id, **more}


def resumes(run: RunTurn, operation: str, record: Mapping[str, Any]) -> bool:
    """Whether this turn resumes exactly the question ``record`` (a deploy or cleanup record in its ``permission``
    phase) paused on: then the question is asked with its recorded ids and not announced again. Taken once."""
    frame = run.resuming
    if frame is None or frame.get("operation") != operation or record.get("phase") != "permission" or (
            frame.get("toolUseId"), frame.get("inputId")) != (record.get("toolUseId"), record.get("inputId")):
        return False
    run.resuming = None  # from here on the turn publishes again
    return True


async def ask_permission(run: RunTurn, request: PermissionRequest, *, scope: str,
                         extra: Mapping[str, Any] | None = None, announced: bool = False) -> Decided:
    """Ask the kernel's permission system for ``request`` (its ``input_id`` set) on the pipeline's behalf:
    ``permission_requested`` (``permission``: the envelope the kernel shows), the request itself (the kernel decides
    by its rules or asks the caller, the task waiting in INPUT_REQUIRED), then ``permission_resolved``.
    ``announced``: a resumed question (:func:`resumes`), whose ``permission_requested`` is journaled already."""
    if not announced:
        display = permission_envelope(request, task_id=run.turn.task_id, context_id=run.turn.context_id,
                                      input_id=request.input_id, language=run.language)
        await run.emit("permission_requested", scope, "input_required",
                       {"toolName": request.tool_name, "toolUseId": request.tool_use_id},
                       extra={**(extra or {}), "permission": display})
    run.out.put_nowait(request)
    await run.kernel_done()  # the kernel has decided: rules, or the caller's answer
    allowed = request.allowed is True
    resolved: dict[str, Any] = {"permissionId": request.input_id, "inputId": request.input_id,
                                "toolUseId": request.tool_use_id, "toolName": request.tool_name,
                                "decision": "allow_once" if allowed else "deny", "pending": False}
    if request.decided_by in ("rule", "auto-approve"):
        resolved["automatic"] = True
    if request.decided_by == "timeout":
        resolved["timedOut"] = True
    await run.emit("permission_resolved", scope, "working", {"kind": "permission", **resolved},
                   extra={**(extra or {}), "permission": resolved})
    return Decided(allowed, resolved, request.decided_by)


async def stack_current_changed(run: RunTurn, action: str, stack: Mapping[str, Any], *, success: bool, current: bool,
                                extra: Mapping[str, Any] | None = None) -> None:
    """``stack_current_changed`` (scope ``stack``, §2.5): ``action`` (``create`` by a deploy, ``delete`` by a
    cleanup) made ``stack`` (a deploy or cleanup record: ``stackId``, ``stackName``, ``regionId``, ``status``) the
    context's current stack (``current: true``) or cleared it (``current: false, cleared: true``)."""
    data: dict[str, Any] = {"action": action, "stackId": str(stack.get("stackId", "")),
                            "stackName": str(stack.get("stackName", "")), "regionId": str(stack.get("regionId", "")),
                            "stackStatus": str(stack.get("status", "")), "isSuccess": success, "current": current}
    if not current:
        data["cleared"] = True
    await run.emit("stack_current_changed", "stack", "working", data, extra=extra)


async def stored_template_text(pipeline: PipelineRuntime, context_id: str, template: Mapping[str, Any]) -> str | None:
    """A pipeline's stored template (its record: ``filename``, ``sha256``, ``artifact_id`` when known) as text: from
    the kernel's artifact store, else its ``artifact_created`` event; only a text matching the recorded SHA-256."""
    sha = str(template.get("sha256", ""))
    candidates: list[str] = []
    artifacts = getattr(pipeline.services.context, "artifacts", None)
    if template.get("artifact_id") and artifacts is not None:
        try:
            found = await artifacts.find(str(template["artifact_id"]), str(template["filename"]))
        except Exception:  # noqa: BLE001 - an unreadable store is the same as a missing artifact
            logger.warning("The stored template %s could not be read.", template.get("filename"))
            found = None
        if found is not None:
            candidates.append(found[1].decode("utf-8", errors="replace"))
    for event in reversed(pipeline.store.journal(context_id).events):
        artifact = event.get("artifact") if event.get("eventType") == "artifact_created" else None
        if isinstance(artifact, Mapping) and artifact.get("filename") == template.get("filename"):
            candidates.append(str(artifact.get("content", "")))
    return next((c for c in candidates if hashlib.sha256(c.encode("utf-8")).hexdigest() == sha), None)


def _outputs(info: StackInfo, secrets: tuple[str, ...]) -> list[dict[str, str]]:
    outputs = []
    for output in info.outputs[:20]:
        item = {"output_key": sanitise(str(output.get("OutputKey", "")), secrets, 128),
                "output_value": sanitise(str(output.get("OutputValue", "")), secrets, 500)}
        if output.get("Description"):
            item["description"] = sanitise(str(output["Description"]), secrets, 200)
        outputs.append(item)
    return outputs


def _percentage(info: StackInfo, resources: list[dict[str, Any]]) -> int:
    if info.status == SUCCESS_STATUS:
        return 100
    if info.progress is not None:
        return max(0, min(100, round(info.progress)))
    if not resources:
        return 0
    done = sum(1 for r in resources if str(r.get("status", "")).endswith("_COMPLETE"))
    return round(100 * done / len(resources))


class RosDeploy:
    """The ``deploying`` step of one pipeline with ``deployer: ros`` (see the module)."""

    def __init__(self, pipeline: PipelineRuntime, settings: RosSettings) -> None:
        self.pipeline = pipeline
        self.settings = settings

    def _secrets(self) -> tuple[str, ...]:
        return self.settings.credentials.secrets() if self.settings.credentials is not None else ()

    def _client(self, region_id: str) -> RosClient:
        assert self.settings.credentials is not None
        return RosClient(self.settings.credentials, region_id, self.settings.endpoint)

    # ------------------------------------------------------------------ the step

    async def run(self, run: RunTurn, step_id: str, plan: DeployPlan) -> None:
        """Deploy ``plan`` on ``step_id`` (already started) and end the run: completed, canceled or failed."""
        record = run.state.get("deploy")
        if not isinstance(record, dict) or (record.get("phase") == "permission"
                                            and record.get("candidateIndex") != plan.candidate_index):
            record = None  # nothing asked yet, or a question about another plan that nobody answered
        phase = record.get("phase") if record is not None else None
        if record is not None and phase == "completed":  # a deploy that reached its end is never repeated
            await self._succeeded(run, step_id, plan, record)
            return
        if record is not None and phase == "failed":
            await self._failed(run, step_id, plan, record)
            return
        if record is not None and phase == "denied":
            await self._denied(run, step_id, plan, record)
            return
        if self.settings.credentials is None:
            await self._fail(run, step_id, plan, record or {}, "credentials_missing",
                             say(run.language, "no_credentials"))
            return
        body = await self._template_body(run, plan)
        if body is None:
            await self._fail(run, step_id, plan, record or {}, "template_unavailable",
                             say(run.language, "no_template", name=plan.candidate_name,
                                 artifact=plan.template["filename"]))
            return
        declared = declared_parameters(body)  # ROS refuses values for parameters the template does not declare
        plan = dataclasses.replace(plan, parameters={k: v for k, v in plan.parameters.items() if k in declared})
        while True:
            if record is None or record.get("phase") == "permission":  # only an allow recorded below gets past this
                record = await self._ask(run, step_id, plan)
                if record["phase"] == "denied":
                    await self._denied(run, step_id, plan, record)
                    return
                if record["phase"] == "failed":  # a further attempt denied: the stack's failure stands
                    await self._failed(run, step_id, plan, record)
                    return
            if record.get("phase") not in ACTING_PHASES:
                raise RuntimeError(f"deploy record in phase {record.get('phase')!r}")  # never call without an allow
            client = self._client(record["regionId"])
            if not await self._act(run, step_id, plan, record, client, body):
                return
            if not await self._poll(run, step_id, plan, record, client):
                return  # completed or failed; else a further attempt is asked for

    # ------------------------------------------------------------------ permission

    def _operation(self, plan: DeployPlan, stack_name: str, region_id: str, action: str = "create",
                   stack_id: str = "") -> dict[str, Any]:
        cost = plan.cost
        summary: dict[str, Any] = {"candidateName": plan.candidate_name, "action": SUMMARY_ACTIONS[action],
                                   "region": region_id,
                                   "stackName": stack_name, "template": str(plan.template["filename"])}
        if cost.get("total_monthly_cost"):
            summary["totalMonthlyCost"] = str(cost["total_monthly_cost"])
        items = [i for i in cost.get("items") or [] if isinstance(i, Mapping)]
        if items:
            summary["resources"] = [{"name": str(i.get("name", "")), "spec": str(i.get("spec") or ""),
                                     "monthlyCost": str(i.get("monthly_cost", ""))} for i in items[:12]]
        if stack_id:
            summary["stackId"] = stack_id
        operation: dict[str, Any] = {
            "product": "ros", "action": action, "region": region_id,
            "target": {"type": "resource", "name": stack_name, **({"id": stack_id} if stack_id else {})},
            "apiCalls": [dict(call) for call in API_CALLS[action]], "stackName": stack_name,
            "deploymentSummary": summary}
        if stack_id:
            operation["stackId"] = stack_id
        return operation

    async def _ask(self, run: RunTurn, step_id: str, plan: DeployPlan) -> dict[str, Any]:
        """Ask the kernel (and through it the caller) for the deploy; the record says ``allowed`` or ``denied``."""
        current = run.state.get("deploy")
        resumed = isinstance(current, dict) and resumes(run, "deploy", current)
        if resumed:  # the question a restart (or a suspension) cut: the same call again, answered by the kernel
            record: dict[str, Any] = current  # type: ignore[assignment]
            tool_use_id, input_id, region_id = record["toolUseId"], record["inputId"], record["regionId"]
        elif isinstance(current, dict) and current.get("phase") == "permission" and current.get("action", "create") \
                != "create" and current.get("candidateIndex") == plan.candidate_index:
            record = current  # a further attempt on the run's stack: asked (again) with new ids
            tool_use_id, input_id, region_id = f"toolu_{new_hex()[:24]}", f"permission-{new_hex()}", record["regionId"]
            record.update(toolUseId=tool_use_id, inputId=input_id)
            await run.record(step_id, status="running")
        else:
            region_id = plan.region_id or self.settings.region or DEFAULT_REGION
            tool_use_id = f"toolu_{new_hex()[:24]}"
            input_id = f"permission-{new_hex()}"
            record = {
                "phase": "permission", "action": "create", "attempt": 0, "toolUseId": tool_use_id, "inputId": input_id,
                "stackName": plan.stack_name,
                "regionId": region_id, "candidateIndex": plan.candidate_index,
                "templateSha256": str(plan.template["sha256"]),
                "clientToken": client_token(run.state["pipelineRunId"], dataclasses.replace(plan, region_id=region_id))}
            run.state["deploy"] = record
            await run.record(step_id, status="running")
        action = str(record.get("action", "create"))
        stack_id = str(record.get("stackId") or "") if action != "create" else ""
        tool_input: dict[str, Any] = {"action": action, "stack_name": record["stackName"], "region_id": region_id}
        if stack_id:
            tool_input["stack_id"] = stack_id
        if action in ("create", "delete_and_create"):
            tool_input.update(template=str(plan.template["filename"]), parameters=dict(plan.parameters))
        request = PermissionRequest(
            tool_use_id, TOOL_NAME, tool_input, is_read_only=False,
            operation=self._operation(plan, record["stackName"], region_id, action, stack_id), input_id=input_id,
            continuation=continuation(run, "deploy", tool_use_id, input_id, stepId=step_id))
        decided = await ask_permission(run, request, scope="step", extra={"step": run.step(step_id)},
                                       announced=resumed)
        if decided.allowed:
            record.update(phase="allowed")
        elif action == "create":
            record.update(phase="denied")
        else:  # nothing called: the failure that led to the question stands
            record.update(phase="failed", **dict(record.get("failure") or {}))
        record.update(decision=decided.resolved["decision"], decidedBy=decided.decided_by)
        await run.record(step_id, status="running")
        return record

    # ------------------------------------------------------------------ the allowed action, exactly once

    async def _act(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any], client: RosClient,
                   body: str) -> bool:
        """Carry out the allowed action up to the stack to poll (each ROS call recorded first); ``False`` when the
        deploy failed on the way."""
        if record["phase"] == "allowed":
            action = record.get("action", "create")
            if action == "continue_create":
                record.update(phase="continuing", continuingAt=time.time())
                await run.record(step_id, status="running")  # durable before ROS hears of it
            elif action == "delete_and_create":
                record.update(phase="deleting", deletingAt=time.time())
                await run.record(step_id, status="running")
            elif action == "wait":
                record.update(phase="created", createdAt=time.time())
                await run.record(step_id, status="running")
        if record["phase"] == "continuing" and not await self._continue(run, step_id, plan, record, client):
            return False
        if record["phase"] == "deleting" and not await self._replace(run, step_id, plan, record, client):
            return False
        if not record.get("stackId"):
            return await self._create(run, step_id, plan, record, client, body)
        return True

    async def _continue(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any],
                        client: RosClient) -> bool:
        """ContinueCreateStack, unless GetStack shows ROS heard it already (a resume): then the stack is polled."""
        stack_id = str(record["stackId"])
        attempt = 0
        while True:
            attempt += 1
            try:
                status = (await client.get_stack(stack_id)).status
                if status in CONTINUABLE:
                    await client.continue_create_stack(stack_id)
                break
            except RosError as error:
                if error.retryable and attempt < CREATE_ATTEMPTS:
                    logger.warning("ContinueCreateStack got no answer (%s); asking ROS again.", error.code)
                    await asyncio.sleep(min(self.settings.poll_interval * attempt, 30.0))
                    continue
                record.update(phase="failed", error="continue_create_failed", rosCode=error.code,
                              message=say(run.language, "ros_error", name=plan.candidate_name, code=error.code,
                                          reason=error.message))
                await self._failed(run, step_id, plan, record)
                return False
        record.update(phase="created", createdAt=time.time())
        await run.record(step_id, status="running")
        return True

    async def _replace(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any],
                       client: RosClient) -> bool:
        """DeleteStack of the rolled-back stack (unless GetStack shows its deletion started: a resume), then GetStack
        until it is gone; the record then has no stack, and CreateStack follows."""
        stack_id = str(record["stackId"])
        deadline = time.time() + self.settings.wait_timeout
        sent = 0
        failure: tuple[str, str] | None = None
        while failure is None:
            try:
                info = await client.get_stack(stack_id)
            except RosError as error:
                if error.code == NOT_FOUND:
                    break  # ROS forgot the deleted stack
                if not error.retryable or time.time() >= deadline:
                    failure = (error.code, error.message)
                    continue
                await asyncio.sleep(self.settings.poll_interval)
                continue
            if info.status == DELETED_STATUS:
                break
            if info.status == "DELETE_FAILED":
                failure = (info.status, info.status_reason)
                record.update(status=info.status, statusReason=info.status_reason)
            elif not info.status.startswith("DELETE_"):  # untouched by ROS: DeleteStack (again)
                sent += 1
                try:
                    await client.delete_stack(stack_id)
                except RosError as error:
                    if error.code == NOT_FOUND:
                        break
                    if not error.retryable or sent >= CREATE_ATTEMPTS:
                        failure = (error.code, error.message)
                        continue
            elif time.time() >= deadline:
                failure = (info.status, str(int(self.settings.wait_timeout)) + " s")
                continue
            await asyncio.sleep(self.settings.poll_interval)
        if failure is not None:
            record.update(phase="failed", error="delete_stack_failed", rosCode=failure[0],
                          message=say(run.language, "ros_error", name=plan.candidate_name, code=failure[0],
                                      reason=failure[1]))
            await self._failed(run, step_id, plan, record)
            return False
        replaced = [*record.get("replacedStackIds", []), stack_id]
        record.pop("stackId", None)
        record.update(phase="replaced", replacedStackIds=replaced, status=DELETED_STATUS)
        await run.record(step_id, status="running")
        return True

    async def _retry(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any],
                     action: str) -> None:
        """Make the record ask for a further attempt (``action``) on the run's stack; the failure it answers is kept
        (a deny ends the step with it)."""
        attempt = int(record.get("attempt", 0)) + 1
        failure = {k: record[k] for k in ("error", "message", "rosCode") if k in record}
        record.update(phase="permission", action=action, attempt=attempt, failure=failure)
        if action == "delete_and_create":
            record["clientToken"] = client_token(run.state["pipelineRunId"],
                                                 dataclasses.replace(plan, region_id=record["regionId"]), attempt)
        await run.record(step_id, status="running")

    # ------------------------------------------------------------------ CreateStack, exactly once

    async def _template_body(self, run: RunTurn, plan: DeployPlan) -> str | None:
        return await stored_template_text(self.pipeline, run.turn.context_id, plan.template)

    async def _create(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any], client: RosClient,
                      body: str) -> bool:
        """CreateStack (recorded ``creating`` first, the stack id after); ``False`` when the deploy failed."""
        sent_before = record["phase"] == "creating"  # a resume: ROS may have created the stack already
        if not sent_before:
            record.update(phase="creating", creatingAt=time.time())
            await run.record(step_id, status="running")  # durable before ROS hears of it
        deadline = time.monotonic() + self.settings.wait_timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                stack_id = await client.create_stack(
                    stack_name=record["stackName"], template_body=body, parameters=plan.parameters,
                    client_token=record["clientToken"], timeout_minutes=self.settings.stack_timeout_minutes)
                break
            except RosError as error:
                if error.code == STACK_EXISTS and (sent_before or attempt > 1):  # never someone else's on a first try
                    adopted = await self._adopt(client, record)
                    if adopted:
                        stack_id = adopted
                        break
                if error.retryable and attempt < CREATE_ATTEMPTS and time.monotonic() < deadline:
                    logger.warning("CreateStack got no answer (%s); sending it again with the same ClientToken.",
                                   error.code)
                    await asyncio.sleep(min(self.settings.poll_interval * attempt, 30.0))
                    continue
                record.update(phase="failed", error="create_stack_failed", rosCode=error.code,
                              message=say(run.language, "ros_error", name=plan.candidate_name, code=error.code,
                                          reason=error.message))
                await self._failed(run, step_id, plan, record)
                return False
        record.update(phase="created", stackId=stack_id, createdAt=time.time())
        await run.record(step_id, status="running")
        return True

    async def _adopt(self, client: RosClient, record: Mapping[str, Any]) -> str | None:
        """The stack our earlier CreateStack made when ROS no longer matches the ClientToken: the one stack of our
        name, created since we recorded ``creating``."""
        try:
            stacks = await client.find_stacks(record["stackName"])
        except RosError:
            return None
        since = float(record.get("creatingAt", 0)) - ADOPT_SLACK_SECONDS
        stacks = [s for s in stacks if s["status"] != DELETED_STATUS and s["stackId"] not in
                  record.get("replacedStackIds", [])]  # a delete_and_create's deleted stack is not ours any more
        ours = [s for s in stacks if s["stackId"] and _epoch(s["createTime"]) >= since]
        return ours[0]["stackId"] if len(ours) == 1 and len(stacks) == 1 else None

    # ------------------------------------------------------------------ polling

    async def _poll(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any],
                    client: RosClient) -> bool:
        """GetStack until the stack's final status (or the wait runs out); ``True`` when a further attempt is to be
        asked for (the record says which), else the step ended."""
        created = float(record.get("createdAt", time.time()))
        deadline = created + self.settings.wait_timeout
        last: tuple[Any, ...] | None = None
        info: StackInfo | None = None
        while True:
            try:
                info = await client.get_stack(record["stackId"])
                resources = await client.stack_resources(record["stackId"])
            except RosError as error:
                if not error.retryable or time.time() >= deadline:
                    record.update(phase="failed", error="stack_status_unavailable", rosCode=error.code,
                                  message=say(run.language, "ros_error", name=plan.candidate_name, code=error.code,
                                              reason=error.message))
                    await self._failed(run, step_id, plan, record)
                    return False
                await asyncio.sleep(self.settings.poll_interval)
                continue
            percentage = _percentage(info, resources)
            seen = (info.status, percentage, resources)
            if seen != last:
                last = seen
                await run.emit("stack_progress", "stack", "working", {
                    "toolUseId": record["toolUseId"], "stackId": record["stackId"],
                    "stackName": info.stack_name or record["stackName"], "regionId": info.region_id or record["regionId"],
                    "status": info.status, "progressPercentage": percentage, "resources": resources,
                    "elapsedSeconds": max(0, int(time.time() - created))}, extra={"step": run.step(step_id)})
            if info.final or time.time() >= deadline:
                break
            await asyncio.sleep(self.settings.poll_interval)
        record.update(status=info.status, statusReason=info.status_reason, elapsedSeconds=max(0, int(time.time() - created)))
        if info.status == SUCCESS_STATUS:
            record.update(phase="completed", outputs=_outputs(info, self._secrets()))
            await run.record(step_id, status="running")
            await self._succeeded(run, step_id, plan, record)
            return False
        values = {"name": plan.candidate_name, "stack": record["stackName"], "stack_id": record["stackId"],
                  "status": info.status}
        if info.final:
            record.update(phase="failed", error="stack_create_failed",
                          message=say(run.language, "stack_failed", reason=info.status_reason, **values))
        else:
            record.update(phase="failed", error="deploy_timeout",
                          message=say(run.language, "timeout", seconds=int(self.settings.wait_timeout), **values))
        action = next_action(info.status)
        if action is not None and int(record.get("attempt", 0)) < MAX_RETRIES:
            await self._retry(run, step_id, plan, record, action)
            return True
        await self._failed(run, step_id, plan, record)
        return False

    # ------------------------------------------------------------------ endings

    def _conclusion(self, plan: DeployPlan, record: Mapping[str, Any], status: str) -> dict[str, Any]:
        conclusion: dict[str, Any] = {"status": status, "deployed": status == "success", "deployer": "ros",
                                      "candidate_name": plan.candidate_name,
                                      "template_artifact": plan.template["filename"],
                                      "template_task_id": plan.template.get("task_id", ""), **plan.conclusion}
        for key, name in (("toolUseId", "tool_use_id"), ("stackId", "stack_id"), ("stackName", "stack_name"),
                          ("regionId", "region_id"), ("status", "stack_status"), ("statusReason", "status_reason"),
                          ("elapsedSeconds", "elapsed_seconds"), ("outputs", "outputs")):
            if record.get(key) not in (None, ""):
                conclusion[name] = record[key]
        return conclusion

    async def _succeeded(self, run: RunTurn, step_id: str, plan: DeployPlan, record: Mapping[str, Any]) -> None:
        await stack_current_changed(run, "create", record, success=True, current=True,
                                    extra={"step": run.step(step_id)})
        await run.step_completed(step_id, self._conclusion(plan, record, "success"))
        message = say(run.language, "deployed", name=plan.candidate_name, stack=record["stackName"],
                      stack_id=record["stackId"], region=record["regionId"])
        run.say(message)
        await self.pipeline.finish(run, "completed", message)

    async def _denied(self, run: RunTurn, step_id: str, plan: DeployPlan, record: Mapping[str, Any]) -> None:
        conclusion = {**self._conclusion(plan, record, "cancelled"), "reason": "permission_denied"}
        await run.step_completed(step_id, conclusion)
        await self.pipeline.finish(run, "canceled", say(run.language, "denied", name=plan.candidate_name,
                                                        artifact=plan.template["filename"],
                                                        task=plan.template.get("task_id", "")))

    async def _fail(self, run: RunTurn, step_id: str, plan: DeployPlan, record: dict[str, Any], error: str,
                    message: str) -> None:
        record = {**record, "phase": "failed", "error": error, "message": message}
        run.state["deploy"] = record
        await self._failed(run, step_id, plan, record)

    async def _failed(self, run: RunTurn, step_id: str, plan: DeployPlan, record: Mapping[str, Any]) -> None:
        """Record the failure (so no resume tries again), then ``step_failed`` and ``pipeline_failed``."""
        message = sanitise(str(record.get("message", "")), self._secrets(), 1000)
        await run.record(step_id, status="running")
        data: dict[str, Any] = {"step_id": step_id, "error": record.get("error", "deploy_failed"), "message": message,
                                "deployment": {**self._conclusion(plan, record, "failed"), "reason": record.get("error")}}
        if record.get("rosCode"):
            data["ros_code"] = record["rosCode"]
        if record.get("stackId"):  # the stack exists (e.g. rolled back): still the context's, for a cleanup
            await stack_current_changed(run, "create", record, success=False, current=True,
                                        extra={"step": run.step(step_id)})
        await run.emit("step_failed", "step", "failed", data, extra={"step": run.step(step_id)})
        await run.record(step_id, status="failed")
        await self.pipeline.finish(run, "failed", message)


def next_action(status: str) -> str | None:
    """The ``ros_deploy`` action a further attempt takes on a stack left in ``status`` (``None``: none fits)."""
    if status in CONTINUABLE:
        return "continue_create"
    if status in REPLACEABLE:
        return "delete_and_create"
    if status == "CREATE_IN_PROGRESS":
        return "wait"
    return None


def _epoch(value: str) -> float:
    """A ROS time (``2026-01-15T08:00:00`` UTC, with or without ``Z``) as seconds since the epoch (0 unknown)."""
    text = value.strip().rstrip("Z")
    for layout in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"):
        try:
            return datetime.strptime(text, layout).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return 0.0


def declared_parameters(template_body: str) -> set[str]:
    """The names a template declares under ``Parameters`` (JSON or YAML; none when it cannot be read)."""
    import json

    import yaml

    document: Any = None
    try:
        document = json.loads(template_body)
    except ValueError:
        try:
            document = yaml.safe_load(template_body)
        except yaml.YAMLError:
            return set()
    parameters = document.get("Parameters") if isinstance(document, dict) else None
    return {str(k) for k in parameters} if isinstance(parameters, dict) else set()


def settings_of(pipeline: PipelineRuntime) -> RosSettings:
    """The ROS settings of the server ``pipeline`` runs in."""
    return RosSettings.from_config(getattr(pipeline.services.context, "config", None))


def default_region(pipeline: PipelineRuntime) -> str:
    """Where a stack goes when the request names no region: ``ros-region``, else cn-hangzhou."""
    return settings_of(pipeline).region or DEFAULT_REGION


async def deploy_with_ros(pipeline: PipelineRuntime, run: RunTurn, step_id: str, plan: DeployPlan) -> None:
    """The ``deploying`` step (already started) with ``deployer: ros``: permission, stack, progress, the end."""
    await RosDeploy(pipeline, settings_of(pipeline)).run(run, step_id, plan)
