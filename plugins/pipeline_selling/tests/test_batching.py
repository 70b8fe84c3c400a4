"""Outbound batching of pipeline events: the limits (count, bytes, delay), order, the lone event, what flushes a
buffer at once, the permission handshake through the batcher, and the configuration keys with their hard limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from iac_code.api import ConfigProblems, PermissionRequest, Progress, RuntimeEvent, TextDelta, TurnFailed
from iac_code.testing import make_kernel
from iac_code_pipeline_selling.batching import BatchSettings, PipelineBatchConfig, batched, event_bytes, unbatched
from iac_code_pipeline_selling.journal import envelope


def _event(sequence: int, padding: int = 0) -> dict[str, Any]:
    return envelope(sequence, event_type="candidate_step_started", scope="candidate_step", status="working",
                    data={"step_id": "template_generating", "note": "x" * padding}, run_id="run-1", task_id="t-1",
                    context_id="c-1", pipeline_name="selling")


def _progress(sequence: int, padding: int = 0) -> Progress:
    return Progress({"pipeline": _event(sequence, padding)})


async def _source(*items: RuntimeEvent) -> AsyncIterator[RuntimeEvent]:
    for item in items:
        yield item


async def _all(stream: AsyncIterator[RuntimeEvent]) -> list[RuntimeEvent]:
    return [event async for event in stream]


def _array_bytes(events: list[dict[str, Any]]) -> int:
    return len(json.dumps(events, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _published(out: list[RuntimeEvent]) -> list[dict[str, Any]]:
    return [e for p in out if isinstance(p, Progress) for e in unbatched(p.metadata)]


async def test_a_flood_respects_the_count_limit_and_keeps_the_order() -> None:
    source = [_progress(n) for n in range(1, 301)]
    out = await _all(batched(_source(*source), BatchSettings()))
    assert all(isinstance(p, Progress) for p in out)
    sizes = [len(unbatched(p.metadata)) for p in out]  # type: ignore[union-attr]
    assert sizes == [64, 64, 64, 64, 44]
    assert all("pipelineBatch" in p.metadata and "pipeline" not in p.metadata for p in out)  # type: ignore[union-attr]
    assert [e["sequence"] for e in _published(out)] == list(range(1, 301))
    assert _published(out) == [p.metadata["pipeline"] for p in source]


async def test_a_flood_respects_the_byte_limit() -> None:
    source = [_progress(n, padding=3000 + 37 * (n % 11)) for n in range(1, 201)]
    out = await _all(batched(_source(*source), BatchSettings()))
    batches = [unbatched(p.metadata) for p in out]  # type: ignore[union-attr]
    assert len(batches) > 1 and all(len(b) < 64 for b in batches)
    assert all(_array_bytes(b) <= 65536 for b in batches)
    # each batch is as full as the limit lets it be: the next event would not have fitted
    for batch, following in zip(batches, batches[1:], strict=False):
        assert _array_bytes([*batch, following[0]]) > 65536
    assert [e["sequence"] for e in _published(out)] == list(range(1, 201))


async def test_smaller_limits_hold_too_and_an_oversized_event_goes_alone() -> None:
    settings = BatchSettings(max_events=5, max_bytes=4000)
    source = [_progress(n, padding=9000 if n == 7 else 400) for n in range(1, 31)]
    out = await _all(batched(_source(*source), settings))
    for progress in out:
        events = unbatched(progress.metadata)  # type: ignore[union-attr]
        assert 1 <= len(events) <= 5
        if len(events) == 1:
            assert "pipeline" in progress.metadata  # type: ignore[union-attr]
        else:
            assert _array_bytes(events) <= 4000
    assert [unbatched(p.metadata) for p in out if any(e["sequence"] == 7 for e in unbatched(p.metadata))] == [  # type: ignore[union-attr]
        [source[6].metadata["pipeline"]]]
    assert [e["sequence"] for e in _published(out)] == list(range(1, 31))


async def test_a_lone_event_goes_single_after_the_delay() -> None:
    """The source blocks after its first event until the consumer has it: only the delay can flush it."""
    received = asyncio.Event()

    async def source() -> AsyncIterator[RuntimeEvent]:
        yield _progress(1)
        await received.wait()
        yield _progress(2)
        yield _progress(3)

    out: list[RuntimeEvent] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    async for event in batched(source(), BatchSettings()):
        if not out:
            assert loop.time() - started >= 0.019  # the 20 ms delay (timers may fire a clock tick early)
            received.set()
        out.append(event)
    assert isinstance(out[0], Progress) and out[0].metadata == {"pipeline": _published(out)[0]}
    assert [len(unbatched(p.metadata)) for p in out] == [1, 2]  # type: ignore[union-attr]
    assert [e["sequence"] for e in _published(out)] == [1, 2, 3]


async def test_the_turn_ending_event_never_waits_and_text_is_not_held_back() -> None:
    final = Progress({"pipeline": _event(4)}, final=True)
    out = await _all(batched(_source(_progress(1), TextDelta("hello"), _progress(2), _progress(3), final),
                             BatchSettings(max_events=64)))
    assert isinstance(out[0], TextDelta)
    assert [e["sequence"] for e in unbatched(out[1].metadata)] == [1, 2, 3]  # type: ignore[union-attr]
    assert out[2] is final and len(out) == 3
    failed = TurnFailed("broken")
    out = await _all(batched(_source(_progress(1), failed), BatchSettings()))
    assert [type(e) for e in out] == [Progress, TurnFailed] and out[1] is failed


async def test_a_permission_request_is_decided_before_the_pipeline_reads_it() -> None:
    seen: list[bool | None] = []

    async def source() -> AsyncIterator[RuntimeEvent]:
        yield _progress(1)
        request = PermissionRequest(tool_use_id="toolu_1", tool_name="deploy", input={})
        yield request
        seen.append(request.allowed)
        yield _progress(2)

    out: list[RuntimeEvent] = []
    async for event in batched(source(), BatchSettings()):
        if isinstance(event, PermissionRequest):
            assert [e["sequence"] for e in _published(out)] == [1]  # flushed before the request
            event.allowed = True
        out.append(event)
    assert seen == [True] and [e["sequence"] for e in _published(out)] == [1, 2]


async def test_an_error_of_the_pipeline_comes_after_its_buffered_events() -> None:
    async def source() -> AsyncIterator[RuntimeEvent]:
        yield _progress(1)
        yield _progress(2)
        raise RuntimeError("boom")

    out: list[RuntimeEvent] = []
    with pytest.raises(RuntimeError, match="boom"):
        async for event in batched(source(), BatchSettings()):
            out.append(event)
    assert [e["sequence"] for e in _published(out)] == [1, 2]


async def test_closing_the_stream_stops_the_pipeline() -> None:
    stopped = asyncio.Event()

    async def source() -> AsyncIterator[RuntimeEvent]:
        try:
            yield TextDelta("one")
            await asyncio.Event().wait()
            yield TextDelta("never")
        finally:
            stopped.set()

    stream = batched(source(), BatchSettings())
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]
    assert stopped.is_set()


def test_event_bytes_is_the_compact_utf8_json() -> None:
    event = _event(1, padding=3)
    assert event_bytes(event) == len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode())


def test_the_keys_their_defaults_and_descriptions() -> None:
    fields = PipelineBatchConfig.model_fields
    assert {name: field.default for name, field in fields.items()} == {
        "pipeline_batch_max_events": 64, "pipeline_batch_max_bytes": 65536, "pipeline_batch_delay_ms": 20}
    assert all(field.description for field in fields.values())


def test_the_server_reads_its_settings(tmp_path: Path) -> None:
    kernel = make_kernel({"persistence-dir": str(tmp_path), "pipeline-batch-max-events": 1024,
                          "pipeline-batch-max-bytes": 1048576, "pipeline-batch-delay-ms": 5})
    assert BatchSettings.from_config(kernel.config) == BatchSettings(1024, 1048576, 0.005)
    assert BatchSettings.from_config(make_kernel({"persistence-dir": str(tmp_path)}).config) == BatchSettings()


@pytest.mark.parametrize(("settings", "message"), [
    ({"pipeline-batch-max-events": 1025},
     "Invalid configuration: pipeline-batch-max-events is 1025, above its hard limit of 1024 events"),
    ({"pipeline-batch-max-bytes": 1048577},
     "Invalid configuration: pipeline-batch-max-bytes is 1048577, above its hard limit of 1048576 bytes"),
    ({"pipeline-batch-delay-ms": 21},
     "Invalid configuration: pipeline-batch-delay-ms is 21, above its hard limit of 20 milliseconds"),
    ({"pipeline-batch-max-events": 0},
     "Invalid configuration: 'pipeline-batch-max-events': Input should be greater than or equal to 1"),
])
def test_values_above_the_hard_limits_are_refused(settings: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigProblems) as refused:
        make_kernel({"persistence-dir": str(tmp_path), **settings})
    assert any(line.startswith(message) for line in refused.value.problems), refused.value.problems
