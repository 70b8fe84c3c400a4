"""A small a2a-sdk agent written the standard way, with no iac-code imports.

It proves an existing SDK ``AgentExecutor`` runs unchanged behind the kernel.
"""

from __future__ import annotations

import asyncio

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_artifact
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part


class ShoutExecutor(AgentExecutor):
    """Answers in upper case; a prompt ending in '?' asks the caller for more input."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await self.start_work(context, event_queue)
        text = context.get_user_input()
        await updater.add_artifact([Part(text=text.upper())], name="shout")
        if text.endswith("?"):
            await updater.requires_input(updater.new_agent_message([Part(text="Tell me more.")]))
            return
        await updater.complete(updater.new_agent_message([Part(text=text.upper())]))

    @staticmethod
    async def start_work(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
        """The task (created from the message on the first turn), marked working."""
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        return updater

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def make_executor() -> ShoutExecutor:
    return ShoutExecutor()


__all__ = ["ShoutExecutor", "StatusFirstExecutor", "WaitingExecutor", "make_executor", "new_text_artifact"]


class StatusFirstExecutor(AgentExecutor):
    """Written to the SDK's older contract: it never enqueues a Task, its first event is a status update.

    ``boom`` in the prompt makes it fail after starting work.
    """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if "boom" in context.get_user_input():
            raise RuntimeError("the agent broke at /srv/secret/path")
        await updater.add_artifact([Part(text="legacy output")], name="out")
        await updater.complete(updater.new_agent_message([Part(text="done")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class WrongContextExecutor(AgentExecutor):
    """Publishes its status for a context that is not the task's (an agent bug)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, "ctx-of-someone-else").start_work()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class WaitingExecutor(ShoutExecutor):
    """``wait`` keeps its turn working until it is cancelled (at most a minute); other prompts as ShoutExecutor."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.get_user_input() != "wait":
            await super().execute(context, event_queue)
            return
        updater = await self.start_work(context, event_queue)
        await asyncio.sleep(60)  # long work: a test cancels it, or kills its server
        await updater.complete()
