"""A trivial A2A agent used to benchmark HTTP servers, not agents.

``TrivialExecutor`` does no real work: it creates the task (if needed),
publishes a few WORKING status updates carrying a short agent text message,
and completes. Both servers under test (ours and a2a-sdk's reference
Starlette app) run this exact executor, so the benchmark measures only the
server/protocol overhead.
"""

from __future__ import annotations

from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Task

#: Number of WORKING status updates published per request.
WORKING_UPDATES = 5

#: SSE events a SendStreamingMessage stream is expected to carry:
#: the Task, the WORKING updates and the final COMPLETED update.
EXPECTED_STREAM_EVENTS = 1 + WORKING_UPDATES + 1


async def ensure_task(context: RequestContext, event_queue: EventQueue) -> Task:
    """The request's task, created (SUBMITTED, history = the message) and published if new."""
    task = context.current_task
    if task is None:
        if context.message is None:
            raise ValueError("a benchmark agent needs a user message")
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
    return task


async def publish_canceled(context: RequestContext, event_queue: EventQueue) -> None:
    """Publish a CANCELED status update for the request's task."""
    task = context.current_task
    task_id = context.task_id or (task.id if task else "")
    context_id = context.context_id or (task.context_id if task else "")
    await TaskUpdater(event_queue, task_id, context_id).cancel()


class TrivialExecutor(AgentExecutor):
    """Agent executor that emits a fixed, tiny sequence of task events."""

    def __init__(self, working_updates: int = WORKING_UPDATES) -> None:
        """Create the executor; ``working_updates`` WORKING events per run."""
        self.working_updates = working_updates

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Create/continue the task, stream WORKING updates, then complete."""
        task = await ensure_task(context, event_queue)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        for i in range(self.working_updates):
            await updater.start_work(
                updater.new_agent_message([new_text_part(f"working {i + 1}/{self.working_updates}")])
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish a CANCELED status update for the task."""
        await publish_canceled(context, event_queue)
