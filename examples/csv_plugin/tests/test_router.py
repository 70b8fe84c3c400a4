"""``iac-code a2a-client`` with ``--router csv`` sends prompts about CSV to the route tagged ``csv``."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest

pytestmark = pytest.mark.asyncio


async def test_a_prompt_about_csv_goes_to_the_route_tagged_csv(iac_code_server_factory, iac_code_client_factory,
                                                                iac_code_scripted_runtime, iac_code_cli):
    plain, tables = await iac_code_server_factory(), await iac_code_server_factory()
    routes = ("--router", "csv", "--route", f"plain={plain.url}", "--route", f"tables={tables.url};tags=csv")
    iac_code_scripted_runtime.script("Three rows.")
    called = await iac_code_cli("a2a-client", "call", *routes, "-p", "Summarise this CSV file", "--output", "json")
    assert called.code == 0, called.err
    task_id = called.json()["task"]["id"]
    task = await (await iac_code_client_factory(tables)).get_task(GetTaskRequest(id=task_id))
    assert task.history[0].parts[0].text == "Summarise this CSV file"
    assert len((await (await iac_code_client_factory(plain)).list_tasks(ListTasksRequest())).tasks) == 0


async def test_route_preview_shows_the_ranking(iac_code_cli):
    routes = ("--router", "csv", "--route", "plain=http://127.0.0.1:9/", "--route", "tables=http://127.0.0.1:9/;tags=csv")
    about_csv, other = await asyncio.gather(*(
        iac_code_cli("a2a-client", "route-preview", *routes, "--prompt", prompt, "--output", "json")
        for prompt in ("two tables", "a VPC")))
    assert [(c["route"]["name"], c["score"]) for c in about_csv.json()["candidates"]] == [("tables", 10), ("plain", 0)]
    assert other.json()["route"]["name"] == "plain"  # no match: the first configured route


async def test_an_unknown_route_name_is_an_error_naming_the_known_ones(iac_code_cli):
    refused = await iac_code_cli("a2a-client", "route-preview", "--router", "csv", "--route", "plain=http://127.0.0.1:9/",
                                 "--name", "nowhere")
    assert refused.code != 0
    assert "Unknown route 'nowhere'. Known routes: plain" in refused.err
