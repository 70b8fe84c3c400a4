"""``text/csv`` parts sent with a2a-sdk's client reach the agent as a Markdown table."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError

pytestmark = pytest.mark.asyncio

SERVERS = "name,region\nweb,cn-hangzhou\ndb,cn-shanghai\n"
TABLE = """Table servers.csv (2 rows):
| name | region |
| --- | --- |
| web | cn-hangzhou |
| db | cn-shanghai |"""


def message(*parts: Part) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id="m-1", role=Role.ROLE_USER, parts=list(parts)))


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_csv_part_reaches_the_agent_as_a_table(binding, iac_code_scripted_runtime, iac_code_server,
                                                       iac_code_client_factory):
    iac_code_scripted_runtime.script("Two servers, in two regions.")
    client = await iac_code_client_factory(iac_code_server, binding=binding)
    events = [event async for event in client.send_message(message(
        Part(text="Where do these run?"), Part(text=SERVERS, media_type="text/csv", filename="servers.csv")))]
    assert iac_code_scripted_runtime.turns[0].prompt == "Where do these run?\n" + TABLE
    status = events[-1].status_update.status
    assert status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # an iac-code turn ends waiting for the next one
    assert [part.text for part in status.message.parts] == ["Two servers, in two regions."]


async def test_raw_csv_bytes_are_decoded_too(iac_code_scripted_runtime, iac_code_client):
    iac_code_scripted_runtime.script("ok")
    [event async for event in iac_code_client.send_message(message(
        Part(raw=SERVERS.encode(), media_type="text/csv", filename="servers.csv")))]
    assert iac_code_scripted_runtime.turns[0].prompt == TABLE


@pytest.mark.parametrize(("csv_text", "reason"), [
    ("name,region\nweb\n", "CSV row 2 has 1 fields; the header has 2."),
    ('name,region\n"web"x,cn-hangzhou\n', "The CSV part is malformed at line 2."),
    ("\n\n", "The CSV part has no header row."),
])
async def test_a_malformed_csv_is_refused_with_the_reason(csv_text, reason, iac_code_scripted_runtime, iac_code_client):
    with pytest.raises(InvalidParamsError) as refused:
        [event async for event in iac_code_client.send_message(message(Part(text=csv_text, media_type="text/csv")))]
    assert refused.value.message == reason
    assert iac_code_scripted_runtime.turns == []  # the agent never saw it
