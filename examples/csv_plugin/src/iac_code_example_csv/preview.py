"""``POST /csv/preview``: check a CSV document the way the decoder will read it, before sending it."""

from __future__ import annotations

from aiohttp import web

from iac_code.api import PartDecodeError
from iac_code_example_csv.decoder import MAX_BYTES, MEDIA_TYPE, parse, to_markdown


async def handle(request: web.Request) -> web.Response:
    """Answer the table's columns, row count and Markdown, or a 4xx with one line saying why not."""
    if request.content_type != MEDIA_TYPE:
        return web.json_response({"error": f"Send the CSV with Content-Type: {MEDIA_TYPE}."}, status=415)
    if (request.content_length or 0) > MAX_BYTES:
        return web.json_response({"error": f"The CSV is larger than {MAX_BYTES // 1024} KiB."}, status=413)
    body = await request.read()  # bounded by the server's request size limit
    try:
        rows = parse(body.decode("utf-8"))
    except UnicodeDecodeError:
        return web.json_response({"error": "The CSV is not valid UTF-8."}, status=400)
    except PartDecodeError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    return web.json_response({"columns": rows[0], "rows": len(rows) - 1, "markdown": to_markdown(rows)})
