"""Decode ``text/csv`` message parts into a Markdown table the agent reads in its prompt."""

from __future__ import annotations

import csv
import io

from iac_code.api import DecodeContext, DecodedPart, InputPart, PartDecodeError

MEDIA_TYPE = "text/csv"
MAX_BYTES = 256 * 1024
MAX_ROWS = 1000


def parse(text: str) -> list[list[str]]:
    """The header and data rows of a CSV document; ``PartDecodeError`` says what is wrong with it."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise PartDecodeError(f"The CSV part is larger than {MAX_BYTES // 1024} KiB.")
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        rows = [row for row in reader if row]
    except csv.Error:
        raise PartDecodeError(f"The CSV part is malformed at line {reader.line_num}.") from None
    if not rows:
        raise PartDecodeError("The CSV part has no header row.")
    if len(rows) - 1 > MAX_ROWS:
        raise PartDecodeError(f"The CSV part has more than {MAX_ROWS} rows.")
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise PartDecodeError(f"CSV row {number} has {len(row)} fields; the header has {width}.")
    return rows


def to_markdown(rows: list[list[str]], title: str = "") -> str:
    """The rows as a Markdown table, under a line naming the table and counting its rows."""
    header, *data = rows

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    caption = f"Table {title} ({len(data)} rows):" if title else f"Table ({len(data)} rows):"
    return "\n".join([caption, line(header), "|" + " --- |" * len(header), *map(line, data)])


def decode(part: InputPart, context: DecodeContext) -> DecodedPart:
    """A ``text`` or ``raw`` ``text/csv`` part becomes prompt text: the table in Markdown."""
    if part.kind == "raw":
        try:
            text = (part.raw or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise PartDecodeError("The CSV part is not valid UTF-8.") from None
    else:
        text = part.text or ""
    return DecodedPart(text=to_markdown(parse(text), part.filename))
