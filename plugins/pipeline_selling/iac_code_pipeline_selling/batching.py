"""Outbound batching of pipeline events (since-0.13 §2.4, §11; tasks-and-context §11.1 and §14).

A pipeline publishes each event as ``Progress({"pipeline": envelope})``. Events that come in a burst (the parallel
candidates' events, say) are better published as one status update: :func:`batched` wraps a pipeline's runtime
events and gathers its pipeline events into ``Progress({"pipelineBatch": {"events": [...]}})``. A buffer is flushed
when it holds ``max_events`` events, when adding the next event would take its serialized size past ``max_bytes``
(or it reached it), or ``delay`` seconds after its first event, whichever comes first; a buffer of one event goes as
it came (``metadata.iac_code.pipeline``). Batching is publication only: each event was journaled before it reached
the buffer, in sequence order, and batches keep that order.

Nothing that ends or pauses the turn waits in a buffer: a ``final`` Progress (the question the turn stops on), any
other Progress, a :class:`TurnFailed`, a :class:`PermissionRequest` and the end of the stream flush the buffer first.
Text, tool and usage events are not pipeline events and are not held back.

The settings are the plugin's own configuration keys (:class:`PipelineBatchConfig`): the card announces the hard
ceilings (1024 events, 1 MiB, 20 ms), so a value above one is a configuration error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iac_code.api import AgentRuntime, PermissionRequest, Progress, RuntimeEvent, ToolCompleted, TurnFailed, TurnRequest

DEFAULT_MAX_EVENTS = 64
DEFAULT_MAX_BYTES = 65536
DEFAULT_DELAY_MS = 20
HARD_MAX_EVENTS = 1024  # the card's maxBatchEvents
HARD_MAX_BYTES = 1048576  # the card's maxBatchBytes
HARD_MAX_DELAY_MS = 20  # the card's maxBatchDelayMs


def _at_most(key: str, value: int, limit: int, unit: str) -> int:
    if value > limit:
        raise ValueError(f"{key} is {value}, above its hard limit of {limit} {unit} (the agent card's ceiling); "
                         f"use at most {limit}.")
    return value


class PipelineBatchConfig(BaseModel):
    """The keys the selling pipelines add to the configuration: how pipeline events are batched on the way out."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    pipeline_batch_max_events: int = Field(
        DEFAULT_MAX_EVENTS, ge=1,
        description=f"Pipeline events published in one status update at most (hard limit {HARD_MAX_EVENTS}).")
    pipeline_batch_max_bytes: int = Field(
        DEFAULT_MAX_BYTES, ge=1,
        description=f"Serialized bytes of the events of one batch at most (hard limit {HARD_MAX_BYTES}).")
    pipeline_batch_delay_ms: int = Field(
        DEFAULT_DELAY_MS, ge=0,
        description=f"Milliseconds a buffered pipeline event waits for others at most (hard limit {HARD_MAX_DELAY_MS}).")

    @field_validator("pipeline_batch_max_events")
    @classmethod
    def _events(cls, value: int) -> int:
        return _at_most("pipeline-batch-max-events", value, HARD_MAX_EVENTS, "events")

    @field_validator("pipeline_batch_max_bytes")
    @classmethod
    def _bytes(cls, value: int) -> int:
        return _at_most("pipeline-batch-max-bytes", value, HARD_MAX_BYTES, "bytes")

    @field_validator("pipeline_batch_delay_ms")
    @classmethod
    def _delay(cls, value: int) -> int:
        return _at_most("pipeline-batch-delay-ms", value, HARD_MAX_DELAY_MS, "milliseconds")


@dataclass(frozen=True)
class BatchSettings:
    """When a buffer of pipeline events is flushed: ``max_events``, ``max_bytes`` (of the serialized JSON array of
    the events) or ``delay`` seconds after its first event."""

    max_events: int = DEFAULT_MAX_EVENTS
    max_bytes: int = DEFAULT_MAX_BYTES
    delay: float = DEFAULT_DELAY_MS / 1000

    @classmethod
    def from_config(cls, config: Any) -> BatchSettings:
        """The settings of a server's configuration (the defaults for keys it does not have)."""
        return cls(max_events=int(getattr(config, "pipeline_batch_max_events", DEFAULT_MAX_EVENTS)),
                   max_bytes=int(getattr(config, "pipeline_batch_max_bytes", DEFAULT_MAX_BYTES)),
                   delay=int(getattr(config, "pipeline_batch_delay_ms", DEFAULT_DELAY_MS)) / 1000)


def event_bytes(event: Mapping[str, Any]) -> int:
    """The size of one event serialized as compact UTF-8 JSON (as the batch limit counts it)."""
    return len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def unbatched(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pipeline events one ``metadata.iac_code`` section carries: its single event or its batch (or none)."""
    if isinstance(metadata.get("pipeline"), Mapping):
        return [dict(metadata["pipeline"])]
    batch = metadata.get("pipelineBatch")
    return [dict(e) for e in batch.get("events", [])] if isinstance(batch, Mapping) else []


def _single(event: RuntimeEvent) -> dict[str, Any] | None:
    """The envelope of a plain pipeline-event Progress (the only kind that is batched), else ``None``."""
    if (isinstance(event, Progress) and not event.final and not event.text and len(event.metadata) == 1
            and isinstance(event.metadata.get("pipeline"), Mapping)):
        return dict(event.metadata["pipeline"])
    return None


class _Buffer:
    def __init__(self, settings: BatchSettings) -> None:
        self.settings = settings
        self.events: list[dict[str, Any]] = []
        self.size = 2  # "[]"
        self.deadline = 0.0

    def fits(self, size: int) -> bool:
        return not self.events or self.size + 1 + size <= self.settings.max_bytes

    def add(self, event: dict[str, Any], size: int, now: float) -> None:
        if not self.events:
            self.deadline = now + self.settings.delay
        self.size += size + (1 if self.events else 0)
        self.events.append(event)

    def full(self) -> bool:
        return len(self.events) >= self.settings.max_events or self.size >= self.settings.max_bytes

    def take(self) -> Progress | None:
        events, self.events, self.size = self.events, [], 2
        if not events:
            return None
        if len(events) == 1:
            return Progress({"pipeline": events[0]})
        return Progress({"pipelineBatch": {"events": events}})


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


def _awaits_kernel(event: Any) -> bool:
    """Events whose handling by the kernel the pipeline reads back before its next event: a permission's decision,
    a stored artifact's reference (``ArtifactPayload.stored``). The pipeline is not read ahead past them."""
    return isinstance(event, PermissionRequest) or (isinstance(event, ToolCompleted) and event.artifact is not None)


async def batched(events: AsyncIterator[RuntimeEvent], settings: BatchSettings) -> AsyncIterator[RuntimeEvent]:
    """``events`` with their pipeline events batched (see the module). A :class:`PermissionRequest` is decided
    before ``events`` is asked for its next event, as the runtime protocol says."""
    queue: asyncio.Queue[tuple[Any, asyncio.Event | None]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def pump() -> None:
        try:
            async for event in events:
                resumed = asyncio.Event() if _awaits_kernel(event) else None
                queue.put_nowait((event, resumed))
                if resumed is not None:
                    await resumed.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # handed to the consumer, which raises it after the flush
            queue.put_nowait((_Raised(error), None))
        finally:
            queue.put_nowait((_END, None))

    task = asyncio.create_task(pump())
    buffer = _Buffer(settings)
    try:
        while True:
            if buffer.events and queue.empty():
                try:
                    item, resumed = await asyncio.wait_for(queue.get(), max(0.0, buffer.deadline - loop.time()))
                except TimeoutError:
                    flushed = buffer.take()
                    if flushed is not None:
                        yield flushed
                    continue
            else:
                item, resumed = await queue.get()
            envelope = _single(item) if not isinstance(item, _Raised) and item is not _END else None
            if envelope is not None:
                size = event_bytes(envelope)
                if not buffer.fits(size):
                    flushed = buffer.take()
                    if flushed is not None:
                        yield flushed
                buffer.add(envelope, size, loop.time())
                if buffer.full():
                    flushed = buffer.take()
                    if flushed is not None:
                        yield flushed
                continue
            if item is _END or isinstance(item, _Raised) or isinstance(item, Progress | TurnFailed) or _awaits_kernel(item):
                flushed = buffer.take()
                if flushed is not None:
                    yield flushed
            if item is _END:
                break
            if isinstance(item, _Raised):
                raise item.error
            yield item
            if resumed is not None:
                resumed.set()
        await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


class BatchingPipeline:
    """A pipeline runtime whose turns publish their pipeline events in batches (:func:`batched`)."""

    def __init__(self, pipeline: AgentRuntime, settings: BatchSettings) -> None:
        self.pipeline = pipeline
        self.settings = settings
        self.name = getattr(pipeline, "name", "pipeline")

    def __getattr__(self, name: str) -> Any:  # the wrapped pipeline's own attributes (its store, say)
        return getattr(self.pipeline, name)

    def run_turn(self, turn: TurnRequest) -> AsyncIterator[RuntimeEvent]:
        """The wrapped pipeline's turn, batched."""
        return batched(self.pipeline.run_turn(turn), self.settings)

    def resume_turn(self, turn: TurnRequest, frame: Mapping[str, Any]) -> AsyncIterator[RuntimeEvent]:
        """The wrapped pipeline's resumed turn (a durable permission wait), batched."""
        resume = getattr(self.pipeline, "resume_turn", None)
        if resume is None:
            raise NotImplementedError("this pipeline cannot resume a turn")
        return batched(resume(turn, frame), self.settings)
