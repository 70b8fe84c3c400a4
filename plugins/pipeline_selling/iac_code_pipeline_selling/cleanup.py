"""A ``cleanupOnly`` continuation after the handoff: remove what the run deployed (since-0.13 §2.5, §6).

The targets are :func:`targets_of` the run's state: the ROS stack a ``deployer: ros`` deploy created (whatever its
final status), unless a cleanup already removed it. Without a target the continuation says so (``cleanup_started``,
``cleanup_completed`` with ``outcome: "nothing_to_clean"``). With one:

1. **Permission, always.** ``permission_requested`` (scope ``stack``; ``permission``: the kernel's envelope) for the
   tool ``ros_delete_stack``, a protected cloud change (only a rule naming it allows it; auto-approval denies it;
   by default the caller is asked), with the §6 ``operation`` ``{"product": "ros", "action": "delete", "region",
   "target": {"type": "resource", "name", "id"}, "apiCalls": [DeleteStack change, GetStack read polling]}``, then
   ``permission_resolved``. A deny (or no answer in time) removes nothing: ``cleanup_completed`` (status
   ``canceled``, ``outcome: "permission_denied"``, ``cleaned: []``).
2. **Exactly once.** The cleanup record in the run's state says ``deleting`` before DeleteStack is sent. A
   continuation cut by a crash is resumed by the next ``cleanupOnly`` message: cut before the decision, the question
   is asked again; cut after ``deleting``, GetStack says whether ROS heard the DeleteStack (``DELETE_IN_PROGRESS``:
   poll it; gone or ``DELETE_COMPLETE``: done) and only a stack ROS shows untouched is sent DeleteStack again.
3. **Progress.** ``cleanup_progress`` (scope ``stack``) whenever GetStack's status or progress changes, until
   ``DELETE_COMPLETE`` (or ``StackNotFound``: ROS forgot the deleted stack). Then the stack is cleared:
   ``stack_current_changed`` (``action: "delete"``, ``current: false``, ``cleared: true``) and
   ``cleanup_completed`` (``outcome: "deleted"``). ``DELETE_FAILED``, a ROS error or the wait running out is
   ``cleanup_failed`` (the stack is kept as the target of the next cleanup).

Every cleanup event carries ``cleanupId`` (``cleanup-<32 hex>``, one per continuation that starts a cleanup, the
same for its resumption); the journal publishes each lifecycle event of one cleanup once. The turn ends like a chat
turn, its final status carrying the ``cleanup_completed`` / ``cleanup_failed`` data under
``metadata.iac_code.assistantFinal.cleanupOnly`` and the summary as text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from iac_code.api import ApiCall, PermissionRequest, Progress
from iac_code_pipeline_selling.deploy import (
    ask_permission,
    continuation,
    new_hex,
    resumes,
    settings_of,
    stack_current_changed,
)
from iac_code_pipeline_selling.ros_client import DELETED_STATUS, IN_PROGRESS_SUFFIX, NOT_FOUND, RosClient, RosError, sanitise
from iac_code_pipeline_selling.texts import text

if TYPE_CHECKING:
    from iac_code_pipeline_selling.runner import PipelineRuntime, RunTurn

logger = logging.getLogger(__name__)

TOOL_NAME = "ros_delete_stack"
DELETING = "DELETE_IN_PROGRESS"
DELETE_ATTEMPTS = 5  # DeleteStack calls without an answer (network errors) before the cleanup fails
FINAL_PHASES = ("nothing", "denied", "deleted", "failed")

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "deleted": "Cleaned up: stack {stack} ({stack_id}) in {region} and its resources were deleted.",
        "denied": "The cleanup was not allowed, so nothing was removed: stack {stack} ({stack_id}) in {region} is "
                  "still there.",
        "failed": "The cleanup failed, so stack {stack} ({stack_id}) in {region} may still be there: {reason}",
        "ros_error": "ROS answered {code}: {reason}",
        "stack_failed": "the stack is {status}. {reason}",
        "timeout": "the stack was still {status} after {seconds} seconds.",
        "no_credentials": "no Alibaba Cloud credentials are configured.",
    },
    "zh": {
        "deleted": "清理完成：已删除地域 {region} 的资源栈 {stack}（{stack_id}）及其资源。",
        "denied": "未获准清理，因此没有删除任何资源：地域 {region} 的资源栈 {stack}（{stack_id}）仍然存在。",
        "failed": "清理失败，地域 {region} 的资源栈 {stack}（{stack_id}）可能仍然存在：{reason}",
        "ros_error": "ROS 返回 {code}：{reason}",
        "stack_failed": "资源栈状态为 {status}。{reason}",
        "timeout": "{seconds} 秒后资源栈仍为 {status}。",
        "no_credentials": "未配置阿里云凭证。",
    },
}


def say(language: str, key: str, **values: Any) -> str:
    """The cleanup sentence ``key`` in ``language`` (English when not translated)."""
    return TEXTS.get(language, TEXTS["en"]).get(key, TEXTS["en"][key]).format(**values)


def targets_of(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cloud resources the run created and no cleanup removed yet: the deployed ROS stack, as
    ``{"type": "ros_stack", "stackId", "stackName", "regionId", "stackStatus"}`` (a run deploys at most one)."""
    record = state.get("deploy")
    if not isinstance(record, Mapping) or not record.get("stackId") or record.get("deleted"):
        return []
    return [{"type": "ros_stack", "stackId": str(record["stackId"]), "stackName": str(record.get("stackName", "")),
             "regionId": str(record.get("regionId", "")), "stackStatus": str(record.get("status", ""))}]


class Cleanup:
    """One ``cleanupOnly`` continuation of a handed-off run (see the module)."""

    def __init__(self, pipeline: PipelineRuntime, run: RunTurn) -> None:
        self.pipeline = pipeline
        self.run = run
        self.settings = settings_of(pipeline)
        self.secrets = self.settings.credentials.secrets() if self.settings.credentials is not None else ()

    async def _save(self) -> None:
        await self.pipeline.save_state(self.run.turn.context_id, self.run.state)

    async def clean_up(self) -> None:
        """Run (or resume) the cleanup and end the turn with its outcome."""
        run, state = self.run, self.run.state
        record = state.get("cleanup")
        if not isinstance(record, dict) or not record.get("cleanupId") or record.get("done"):
            record = {"cleanupId": f"cleanup-{new_hex()}", "phase": "started",
                      "targets": self.pipeline.cleanup_targets(state)}
            state["cleanup"] = record
            await self._save()
        try:
            await self._clean_up(record)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the continuation reports its own failure, the stack stays a target
            logger.exception("The cleanup of context %s failed", run.turn.context_id)
            record.update(phase="failed", error="internal_error", message="")
            await self._save()
            await self._finish(record)

    async def _clean_up(self, record: dict[str, Any]) -> None:
        run = self.run
        if run.resuming is None:  # a resumed question: the cleanup started before it (journaled then)
            await run.emit("cleanup_started", "stack", "working",
                           {"cleanupId": record["cleanupId"], "reason": "cleanup_only", "resources": record["targets"]})
        if not record["targets"]:
            record["phase"] = "nothing"
        if record["phase"] in FINAL_PHASES:
            await self._finish(record)
            return
        target = record["targets"][0]
        if self.settings.credentials is None:
            record.update(phase="failed", error="credentials_missing", message=say(run.language, "no_credentials"))
            await self._save()
            await self._finish(record)
            return
        if record["phase"] in ("started", "permission"):  # only an allow recorded below lets the run past this
            await self._ask(record, target)
            if record["phase"] == "denied":
                await self._finish(record)
                return
        if record["phase"] not in ("allowed", "deleting"):
            raise RuntimeError(f"cleanup record in phase {record['phase']!r}")  # never delete without an allow
        client = RosClient(self.settings.credentials, target["regionId"], self.settings.endpoint)
        if await self._delete(record, target, client):
            await self._poll(record, target, client)
        await self._finish(record)

    # ------------------------------------------------------------------ permission

    async def _ask(self, record: dict[str, Any], target: Mapping[str, Any]) -> None:
        run = self.run
        resumed = resumes(run, "cleanup", record)
        if resumed:  # the question a restart (or a suspension) cut: the same call again, answered by the kernel
            tool_use_id, input_id = str(record["toolUseId"]), str(record["inputId"])
        else:
            tool_use_id = f"toolu_{new_hex()[:24]}"
            input_id = f"permission-{new_hex()}"
            record.update(phase="permission", toolUseId=tool_use_id, inputId=input_id)
            await self._save()
        operation = {"product": "ros", "action": "delete", "region": target["regionId"],
                     "target": {"type": "resource", "name": target["stackName"], "id": target["stackId"]},
                     "apiCalls": [{"product": "ROS", "action": "DeleteStack", "effect": "change"},
                                  {"product": "ROS", "action": "GetStack", "effect": "read", "repeat": "polling"}],
                     "stackName": target["stackName"], "stackId": target["stackId"]}
        request = PermissionRequest(
            tool_use_id, TOOL_NAME,
            {"stack_id": target["stackId"], "stack_name": target["stackName"], "region_id": target["regionId"]},
            is_read_only=False, operation=operation, input_id=input_id,
            api_calls=(ApiCall("ROS", "DeleteStack", "change"), ApiCall("ROS", "GetStack", "read", "polling")),
            continuation=continuation(run, "cleanup", tool_use_id, input_id, cleanupId=str(record["cleanupId"])))
        decided = await ask_permission(run, request, scope="stack", announced=resumed)
        record.update(phase="allowed" if decided.allowed else "denied", decision=decided.resolved["decision"],
                      decidedBy=decided.decided_by)
        await self._save()

    # ------------------------------------------------------------------ DeleteStack, exactly once

    async def _delete(self, record: dict[str, Any], target: Mapping[str, Any], client: RosClient) -> bool:
        """DeleteStack unless ROS shows it already started (a resume); ``False`` when the cleanup ended."""
        run = self.run
        if record["phase"] == "deleting":  # a resume: did ROS hear the DeleteStack sent before the cut?
            try:
                info = await client.get_stack(target["stackId"])
            except RosError as error:
                if error.code == NOT_FOUND:
                    record.update(phase="deleted", status=DELETED_STATUS)
                    await self._deleted(record)
                    return False
                return True  # polling decides (it retries network errors within the wait)
            if info.status == DELETED_STATUS:
                record.update(phase="deleted", status=DELETED_STATUS)
                await self._deleted(record)
                return False
            if info.status.startswith("DELETE_"):
                return True  # in progress, or failed: polling reports it
        else:
            record.update(phase="deleting", deleteSentAt=time.time())
            await self._save()  # durable before ROS hears of it
        deadline = time.monotonic() + self.settings.wait_timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                await client.delete_stack(target["stackId"])
                return True
            except RosError as error:
                if error.code == NOT_FOUND:  # already gone
                    record.update(phase="deleted", status=DELETED_STATUS)
                    await self._deleted(record)
                    return False
                if error.retryable and attempt < DELETE_ATTEMPTS and time.monotonic() < deadline:
                    logger.warning("DeleteStack got no answer (%s); asking ROS again.", error.code)
                    await asyncio.sleep(min(self.settings.poll_interval * attempt, 30.0))
                    if await self._started(client, target["stackId"]):
                        return True  # the first call did reach ROS
                    continue
                record.update(phase="failed", error="delete_stack_failed", rosCode=error.code,
                              message=say(run.language, "ros_error", code=error.code, reason=error.message))
                await self._save()
                return False

    @staticmethod
    async def _started(client: RosClient, stack_id: str) -> bool:
        """Whether ROS shows the stack's deletion started (or done): then DeleteStack is not sent again."""
        try:
            info = await client.get_stack(stack_id)
        except RosError as error:
            return error.code == NOT_FOUND
        return info.status.startswith("DELETE_")

    async def _poll(self, record: dict[str, Any], target: Mapping[str, Any], client: RosClient) -> None:
        run = self.run
        started = float(record.get("deleteSentAt", time.time()))
        deadline = started + self.settings.wait_timeout
        last: tuple[str, int] | None = None
        status = reason = ""
        while True:
            try:
                info = await client.get_stack(target["stackId"])
                status, reason = info.status, info.status_reason
                progress = info.progress
            except RosError as error:
                if error.code == NOT_FOUND:  # ROS forgets a deleted stack
                    status, reason, progress = DELETED_STATUS, "", 100.0
                elif not error.retryable or time.time() >= deadline:
                    record.update(phase="failed", error="stack_status_unavailable", rosCode=error.code,
                                  message=say(run.language, "ros_error", code=error.code, reason=error.message))
                    await self._save()
                    return
                else:
                    await asyncio.sleep(self.settings.poll_interval)
                    continue
            percentage = 100 if status == DELETED_STATUS else max(0, min(100, round(progress or 0)))
            if (status, percentage) != last:
                last = (status, percentage)
                await run.emit("cleanup_progress", "stack", "working", {
                    "cleanupId": record["cleanupId"], "toolUseId": record.get("toolUseId", ""),
                    "stackId": target["stackId"], "stackName": target["stackName"], "regionId": target["regionId"],
                    "status": status, "progressPercentage": percentage,
                    "elapsedSeconds": max(0, int(time.time() - started))})
            final = bool(status) and not status.endswith(IN_PROGRESS_SUFFIX)
            if final or time.time() >= deadline:
                break
            await asyncio.sleep(self.settings.poll_interval)
        record.update(status=status, elapsedSeconds=max(0, int(time.time() - started)))
        if status == DELETED_STATUS:
            record["phase"] = "deleted"
            await self._deleted(record)
            return
        key, values = ("stack_failed", {"status": status, "reason": reason}) if final else (
            "timeout", {"status": status, "seconds": int(self.settings.wait_timeout)})
        record.update(phase="failed", error="stack_delete_failed" if final else "cleanup_timeout",
                      message=say(run.language, key, **values))
        await self._save()

    async def _deleted(self, record: dict[str, Any]) -> None:
        """Record the stack as removed: the run's deploy no longer has a cleanup target."""
        deploy = self.run.state.get("deploy")
        if isinstance(deploy, dict):
            deploy["deleted"] = True
        await self._save()

    # ------------------------------------------------------------------ the end

    async def _finish(self, record: dict[str, Any]) -> None:
        """The cleanup's last events (published once, also when a resume repeats them) and the turn's summary."""
        run = self.run
        phase = record["phase"]
        targets = record["targets"]
        base = {"cleanupId": record["cleanupId"]}
        values = ({"stack": targets[0]["stackName"], "stack_id": targets[0]["stackId"],
                   "region": targets[0]["regionId"]} if targets else {})
        if phase == "nothing":
            result = {**base, "outcome": "nothing_to_clean", "cleaned": [], "remaining": [],
                      "summary": text(run.language, "cleanup_nothing")}
            await run.emit("cleanup_completed", "stack", "completed", result)
        elif phase == "deleted":
            cleaned = [{**t, "stackStatus": DELETED_STATUS} for t in targets]
            await stack_current_changed(run, "delete", {**targets[0], "status": DELETED_STATUS}, success=True,
                                        current=False)
            result = {**base, "outcome": "deleted", "cleaned": cleaned, "remaining": [],
                      "summary": say(run.language, "deleted", **values)}
            await run.emit("cleanup_completed", "stack", "completed", result)
        elif phase == "denied":
            result = {**base, "outcome": "permission_denied", "cleaned": [], "remaining": targets,
                      "summary": say(run.language, "denied", **values)}
            await run.emit("cleanup_completed", "stack", "canceled", result)
        else:
            reason = sanitise(str(record.get("message") or record.get("error", "")), self.secrets, 1000)
            result = {**base, "outcome": "failed", "error": record.get("error", "cleanup_failed"), "message": reason,
                      "cleaned": [], "remaining": targets,
                      "summary": say(run.language, "failed", reason=reason, **values) if targets else reason}
            if record.get("rosCode"):
                result["rosCode"] = record["rosCode"]
            await run.emit("cleanup_failed", "stack", "failed", result)
        record["done"] = True
        record["outcome"] = result["outcome"]
        await self._save()
        run.say(result["summary"])
        run.out.put_nowait(Progress({"assistantFinal": {"cleanupOnly": result}}, final=True))


async def clean_up(pipeline: PipelineRuntime, run: RunTurn) -> None:
    """The ``cleanupOnly`` continuation of ``run`` (a handed-off run's turn); its events go to ``run.out``."""
    await Cleanup(pipeline, run).clean_up()
