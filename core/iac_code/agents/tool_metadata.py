"""Safe projections of tool inputs and results for ``metadata.iac_code``.

``input_summary`` shows only the *shape* of a tool's input: no string values,
and field names outside an allow-list replaced by a fingerprint, so business
payloads never leave the process through progress metadata. ``tool_result``
cuts every string at 4,000 characters and drops artifact payloads (the artifact
is announced separately). ``sanitise_text`` redacts secrets in display texts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

FIELD_LIMIT = 4000
MAX_DEPTH = 16
MAX_FIELDS = 64
NODE_BUDGET = 512
# Every level of a shape is two JSON objects (the shape and its ``fields``), each three protobuf messages deep
# in a Struct; a task (and a pipeline event inside it) must stay under protobuf's 100-level parse limit, or the
# update that carries it cannot be stored or sent. Shapes therefore stop at 8 levels, results at 24.
SHAPE_DEPTH = 8
RESULT_DEPTH = 24
ARTIFACT_PAYLOAD_KEYS = frozenset({"content", "bytes", "base64", "raw", "path"})
TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
ALLOWED_FIELDS = frozenset("""
command cmd path file_path action product params body method pathname region region_id cwd timeout content input
query url _truncated fields fields_truncated field_count tool_name type length fingerprint redacted truncated prefix
suffix is_read_only headers payload params_fields params_field_count params_field_shapes params_fields_truncated
params_shape body_fields body_field_count body_field_shapes body_fields_truncated body_shape pathname_shape
pathname_fingerprint product_fingerprint action_fingerprint region_fingerprint style
""".split())
SECRET_NAME = re.compile(r"(secret|token|password|passwd|credential|private|api[_-]?key|access[_-]?key)", re.I)

_SECRETS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(--?(?:password|token|secret|access-key(?:-id|-secret)?|api-key)[= ])\S+"),
    re.compile(r"(?i)([\"']?[A-Za-z0-9_-]*(?:secret|token|password|passwd|api[_-]?key|access[_-]?key)"
               r"[A-Za-z0-9_-]*[\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;}]+)"),
    re.compile(r"\b(LTAI[A-Za-z0-9]{8,}|AKIA[A-Z0-9]{12,}|sk-[A-Za-z0-9_-]{8,})\b"),
]


def fingerprint(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]


def sanitise_text(text: str) -> str:
    """Redact PEM keys, bearer tokens, secret flags and ``key=value`` secrets."""
    text = _SECRETS[0].sub("[REDACTED]", text)
    text = _SECRETS[1].sub(lambda m: f"{m.group(1)} [REDACTED]", text)
    text = _SECRETS[2].sub(lambda m: f"{m.group(1)}[REDACTED]", text)
    text = _SECRETS[3].sub(lambda m: f"{m.group(1)}[REDACTED]", text)
    return _SECRETS[4].sub("[REDACTED]", text)


def _field_name(name: str) -> str:
    return name if name in ALLOWED_FIELDS and not SECRET_NAME.search(name) else fingerprint(name)


def input_shape(value: Any, depth: int = 0, budget: list[int] | None = None) -> dict[str, Any]:
    """The shape of a JSON value: types, lengths of arrays, allowed field names; never values."""
    budget = budget if budget is not None else [NODE_BUDGET]
    budget[0] -= 1
    if value is None:
        return {"type": "null"}
    if isinstance(value, Mapping):
        if depth >= SHAPE_DEPTH or budget[0] <= 0:
            return {"type": "object", "truncated": True}
        fields: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_FIELDS or budget[0] <= 0:
                return {"type": "object", "field_count": len(value), "fields": fields, "_truncated": True}
            fields[_field_name(str(key))] = input_shape(item, depth + 1, budget)
        return {"type": "object", "field_count": len(value), "fields": fields}
    if isinstance(value, list | tuple):
        return {"type": "array", "length": len(value)}
    return {"type": type(value).__name__}


def input_summary(tool_name: str, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """``inputSummary`` of a completed tool input (shape only)."""
    shape = input_shape(tool_input)
    summary: dict[str, Any] = {
        "tool_name": tool_name if TOOL_NAME.fullmatch(tool_name) else fingerprint(tool_name),
        "fields": shape.get("fields", {}),
    }
    if shape.get("_truncated") or shape.get("truncated"):
        summary["fields_truncated"] = True
    return summary


def tool_result(value: Any, depth: int = 0, in_artifact: bool = False) -> Any:
    """A JSON-safe copy of a tool result: strings cut at 4,000, artifact payloads dropped."""
    if depth > RESULT_DEPTH:
        return "[truncated-depth]"
    if isinstance(value, str):
        return value[:FIELD_LIMIT]
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            key = str(key)
            if in_artifact and key in ARTIFACT_PAYLOAD_KEYS:
                continue
            result[key] = tool_result(item, depth + 1, in_artifact or key in ("artifact", "artifacts"))
        return result
    if isinstance(value, list | tuple):
        return [tool_result(item, depth + 1, in_artifact) for item in value]
    return str(value)[:FIELD_LIMIT]
