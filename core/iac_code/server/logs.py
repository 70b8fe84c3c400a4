"""Log output: text lines, or one JSON object per line (``log-format: json``).

A JSON line holds ``timestamp`` (UTC, ISO 8601), ``level``, ``logger`` and
``message``, plus ``taskId`` / ``contextId`` when the call site passed them as
``extra={"task_id": ..., "context_id": ...}`` and ``exception`` for a logged
traceback. Log calls never carry header values or credentials (the project's
rule); as a second line of defence, every URL in a formatted line (message and
traceback alike) has its credentials masked (:func:`iac_code.base.url_credentials.mask_urls_in`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from iac_code.base import jsonio
from iac_code.base.url_credentials import mask_urls_in

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One compact JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_urls_in(record.getMessage()),
        }
        for attribute, key in (("task_id", "taskId"), ("context_id", "contextId"), ("trace_id", "traceId")):
            value = getattr(record, attribute, None)
            if value:
                line[key] = str(value)
        if record.exc_info:
            line["exception"] = mask_urls_in(self.formatException(record.exc_info))
        return jsonio.dumps(line).decode("utf-8")


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` lines, URL credentials masked."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return mask_urls_in(super().format(record))


def formatter(log_format: str) -> logging.Formatter:
    """The formatter for the ``log-format`` setting."""
    return JsonFormatter() if log_format == "json" else TextFormatter()
