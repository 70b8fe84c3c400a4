"""A one-update A2A agent used to benchmark HTTP servers, not agents.

``OneUpdateExecutor`` is the shape of a typical small real agent turn, with
no real work: it creates the task (SUBMITTED, history = [the user message]),
publishes one WORKING status update whose message is the agent text ``ack``,
one text artifact (name ``result``), and completes with an agent message that
echoes the input text. Both servers under test (ours and a2a-sdk's reference
Starlette app) run this exact executor, so the benchmark measures only the
server/protocol overhead.
"""

from __future__ import annotations

from a2a.helpers import get_message_text, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from trivial_agent import ensure_task, publish_canceled

#: Text of the WORKING update's agent message.
ACK_TEXT = "ack"
#: Name and text of the artifact.
ARTIFACT_NAME = "result"
ARTIFACT_TEXT = "one-update result"

#: SSE events a SendStreamingMessage stream is expected to carry:
#: the Task, the WORKING update, the artifact update and the final COMPLETED update.
EXPECTED_STREAM_EVENTS = 4


class OneUpdateExecutor(AgentExecutor):
    """Agent executor: Task -> WORKING("ack") -> artifact "result" -> COMPLETED(echo)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Create/continue the task, one WORKING update, one artifact, then complete."""
        task = await ensure_task(context, event_queue)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work(updater.new_agent_message([new_text_part(ACK_TEXT)]))
        await updater.add_artifact([new_text_part(ARTIFACT_TEXT)], name=ARTIFACT_NAME)
        echo = get_message_text(context.message) if context.message is not None else ""
        await updater.complete(updater.new_agent_message([new_text_part(echo)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish a CANCELED status update for the task."""
        await publish_canceled(context, event_queue)
