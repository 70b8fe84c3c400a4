"""Turns an A2A message's parts into prompt input through the decoder plugins.

Decoding runs before a2a-sdk creates or resumes the task, so a refused part is
a JSON-RPC invalid-params error and no task is left behind.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import Message, Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from iac_code.base.records import DecodedPart, InputPart, PartDecodeError, PartDecoderSpec, Provided
from iac_code.language import messages as m
from iac_code.security.workspace import TaskDecodeContext, allowed_roots

# A part without a media type is text/plain (A2A input spec), except a data part, whose
# content is JSON by definition.
DEFAULT_MEDIA_TYPE = {"text": "text/plain", "data": "application/json", "raw": "text/plain", "url": "text/plain"}


@dataclass(frozen=True)
class DecodedInput:
    """The prompt text and manifest entries decoded from one message."""

    prompt: str
    manifest: tuple[Mapping[str, Any], ...] = ()


def to_input_part(part: Part, raw: Mapping[str, Any] | None = None) -> InputPart:
    """The SDK-neutral view of one protobuf part.

    ``raw`` is the part as the caller sent it in JSON, when known; data parts
    take their value from it so numbers keep their exact JSON form.
    """
    kind = part.WhichOneof("content") or "text"
    media_type = (part.media_type or DEFAULT_MEDIA_TYPE[kind]).split(";", 1)[0].strip().lower()
    metadata = MessageToDict(part.metadata) if part.HasField("metadata") else {}
    if kind == "text":
        return InputPart("text", media_type, text=part.text, filename=part.filename, metadata=metadata)
    if kind == "data":
        data = raw["data"] if raw is not None and "data" in raw else MessageToDict(part.data)
        return InputPart("data", media_type, data=data, filename=part.filename, metadata=metadata)
    if kind == "raw":
        return InputPart("raw", media_type, raw=part.raw, filename=part.filename, metadata=metadata)
    return InputPart("url", media_type, url=part.url, filename=part.filename, metadata=metadata)


class InputDecoder:
    """Looks up the most specific decoder for each part and joins the results."""

    def __init__(self, table: dict[tuple[str, str], Provided[PartDecoderSpec]]) -> None:
        self._table = {key: p.record for key, p in table.items()}

    def lookup(self, kind: str, media_type: str) -> PartDecoderSpec | None:
        major = media_type.split("/", 1)[0]
        for key in ((kind, media_type), (kind, f"{major}/*"), (kind, "*")):
            spec = self._table.get(key)
            if spec is not None:
                return spec
        return None

    def decode(self, message: Message, cwd: str, raw_parts: Any = None) -> DecodedInput:
        """Decode every part; ``raw_parts`` is the message's JSON ``parts`` list, if known.

        ``message.task_id`` (already resolved to one of the caller's tasks) lets
        ``file://`` parts read that task's own artifacts.
        """
        context = TaskDecodeContext(cwd=cwd, allowed_roots=allowed_roots(), task_id=message.task_id)
        texts: list[str] = []
        manifest: list[Mapping[str, Any]] = []
        if not isinstance(raw_parts, list) or len(raw_parts) != len(message.parts):
            raw_parts = [None] * len(message.parts)
        for index, part in enumerate(message.parts):
            raw = raw_parts[index] if isinstance(raw_parts[index], dict) else None
            view = to_input_part(part, raw)
            spec = self.lookup(view.kind, view.media_type)
            if spec is None:
                raise ContentTypeNotSupportedError(
                    message=f"Unsupported media type {view.media_type[:100]!r} for {view.kind} part {index}")
            try:
                decoded: DecodedPart = spec.decode(view, context)
            except PartDecodeError as exc:
                raise InvalidParamsError(message=str(exc)) from None
            if decoded.text:
                texts.append(decoded.text)
            if decoded.manifest_entry is not None:
                manifest.append(decoded.manifest_entry)
        return DecodedInput(prompt="\n".join(texts), manifest=tuple(manifest))


SUPPORTED_LANGUAGES = frozenset({"en", "zh", "es", "fr", "de", "ja", "pt"})
CHANNEL_LIMIT = 128


@dataclass(frozen=True)
class TurnInput:
    """Everything the kernel read from one message before the turn runs.

    ``error`` is set when the turn must fail instead of running (e.g. an
    invalid workspace); its text is safe to show the caller. ``error_detail``
    (a catalog id) explains it in a second text part, and ``error_info`` is the
    failed status's ``metadata.iac_code.error`` (``code``, ``reason``).
    """

    decoded: DecodedInput = DecodedInput(prompt="")
    cwd: str = ""
    language: str | None = None
    channel: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_detail: str | None = None
    error_info: Mapping[str, str] = field(default_factory=dict)
    run_mode: str = "normal"
    pipeline_name: str = ""  # the pipeline the request names ("": its session's, else the server's)
    llm_headers: Mapping[str, str] | None = None  # the context's new LLM headers (None: keep them)


UNSUPPORTED_RUN_MODE = m.UNSUPPORTED_RUN_MODE  # localised where raised (the request's preferredLanguage)
UNSUPPORTED_PIPELINE = m.UNSUPPORTED_PIPELINE
SWITCHED_PIPELINE = m.SWITCHED_PIPELINE
CLEANUP_WITHOUT_HANDOFF = m.CLEANUP_WITHOUT_HANDOFF


def cleanup_only(metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata.iac_code.cleanupOnly`` asks for a cleanup continuation (only JSON ``true`` does)."""
    return metadata.get("cleanupOnly") is True


def read_run_mode(metadata: Mapping[str, Any], default_mode: str, pipelines: Collection[str]) -> tuple[str, str]:
    """The request's run mode and the pipeline it names: ``run_mode`` (or ``runMode``; ``run_mode`` wins)
    else ``default_mode``; ``pipeline_name`` only in pipeline mode, ``""`` when it names none.

    Raises ``ValueError`` with the protocol's text for a mode or pipeline name this server does not run.
    """
    raw = metadata.get("run_mode") if "run_mode" in metadata else metadata.get("runMode")
    if raw is None and "run_mode" not in metadata and "runMode" not in metadata:
        mode = default_mode
    elif isinstance(raw, str) and raw.strip().lower() in ("normal", "pipeline"):
        mode = raw.strip().lower()
    else:
        raise ValueError(UNSUPPORTED_RUN_MODE)
    if mode != "pipeline":
        return mode, ""
    name = metadata.get("pipeline_name")
    if name is None or (isinstance(name, str) and not name.strip()):
        return mode, ""
    if not isinstance(name, str) or name.strip() not in pipelines:
        raise ValueError(UNSUPPORTED_PIPELINE)
    return mode, name.strip()


# Per-turn secrets a client may put in ``metadata.iac_code``: the runtime gets them, the task never stores them
# (``llm_headers`` reaches the runtime as ``TurnRequest.llm_headers``, see :mod:`iac_code.tasks.llm_headers`).
TURN_SECRET_KEYS = ("iac_code_api_key", "iacCodeApiKey", "llm_headers")


def strip_turn_secrets(message: Message) -> None:
    """Remove :data:`TURN_SECRET_KEYS` from the message in place, so history, snapshots and replies never hold them."""
    if not message.HasField("metadata") or "iac_code" not in message.metadata.fields:
        return
    section = message.metadata.fields["iac_code"]
    if section.HasField("struct_value"):
        for key in TURN_SECRET_KEYS:
            if key in section.struct_value.fields:
                del section.struct_value.fields[key]


UNSUPPORTED_REGION = m.UNSUPPORTED_REGION
_REGION_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
REGION_KEY = "alibaba_cloud_region_id"


def check_region_only(metadata: Mapping[str, Any]) -> None:
    """A region given without an access key (``alibaba_cloud_region_id`` alone) must be a region id.

    It then overrides only the region of the server's own credentials. Beside a key id or secret
    it belongs to those metadata credentials (a pair uses it; a lone half is ignored with them).
    Raises ``ValueError`` with the protocol's text.
    """
    region = metadata.get(REGION_KEY)
    if region is None:
        return
    if any(metadata.get(k) not in (None, "") for k in ("alibaba_cloud_access_key_id",
                                                      "alibaba_cloud_access_key_secret")):
        return
    if not isinstance(region, str) or not _REGION_ID.fullmatch(region):
        raise ValueError(UNSUPPORTED_REGION)


def iac_code_metadata(message: Message, raw_message: Any = None) -> dict[str, Any]:
    """``message.metadata.iac_code`` as plain JSON (from the raw request when known)."""
    if isinstance(raw_message, dict):
        metadata = raw_message.get("metadata")
    else:
        metadata = MessageToDict(message.metadata) if message.HasField("metadata") else None
    section = metadata.get("iac_code") if isinstance(metadata, dict) else None
    return section if isinstance(section, dict) else {}


def normalise_language(value: Any) -> str | None:
    """``zh-CN`` → ``zh``; unknown or non-string values → ``None``."""
    if not isinstance(value, str):
        return None
    code = value.strip().lower().replace("_", "-").split("-", 1)[0]
    return code if code in SUPPORTED_LANGUAGES else None


def normalise_channel(value: Any) -> str | None:
    """Trimmed, at most 128 characters; empty or non-string → ``None``."""
    if not isinstance(value, str):
        return None
    channel = value.strip()[:CHANNEL_LIMIT]
    return channel or None
