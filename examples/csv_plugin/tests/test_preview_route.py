"""``POST /csv/preview`` on the running server's HTTP transport."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.asyncio

CSV = {"Content-Type": "text/csv"}


async def test_the_preview_answers_columns_rows_and_the_table(iac_code_server):
    async with httpx.AsyncClient() as http:
        reply = await http.post(iac_code_server.url + "csv/preview", content="name,size\nweb,2\n", headers=CSV)
    assert reply.status_code == 200
    assert reply.json() == {"columns": ["name", "size"], "rows": 1,
                            "markdown": "Table (1 rows):\n| name | size |\n| --- | --- |\n| web | 2 |"}


@pytest.mark.parametrize(("body", "headers", "status", "error"), [
    ("name,size\nweb\n", CSV, 400, "CSV row 2 has 1 fields; the header has 2."),
    (b"name\n\xff\n", CSV, 400, "The CSV is not valid UTF-8."),
    ("name,size\n", {"Content-Type": "application/json"}, 415, "Send the CSV with Content-Type: text/csv."),
    ("x" * (256 * 1024 + 1), CSV, 413, "The CSV is larger than 256 KiB."),
])
async def test_a_bad_request_gets_one_line_saying_why(body, headers, status, error, iac_code_server):
    async with httpx.AsyncClient() as http:
        reply = await http.post(iac_code_server.url + "csv/preview", content=body, headers=headers)
    assert (reply.status_code, reply.json()) == (status, {"error": error})


@pytest.mark.parametrize("iac_code_settings", [{"token": "preview-token"}])
async def test_the_preview_needs_the_servers_credentials(iac_code_server):
    async with httpx.AsyncClient() as http:
        anonymous = await http.post(iac_code_server.url + "csv/preview", content="a\n1\n", headers=CSV)
        signed_in = await http.post(iac_code_server.url + "csv/preview", content="a\n1\n",
                                    headers={**CSV, "Authorization": "Bearer preview-token"})
    assert (anonymous.status_code, signed_in.status_code) == (401, 200)
