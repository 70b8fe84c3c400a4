"""The context's working template: the template a conversation is about, kept in the context's session so that
whoever made it (a pipeline handing off with its chosen candidate) and the chat runtime that edits it next agree.

A producer calls :func:`set_working_template`; a chat runtime reads :func:`working_template` and decides itself how
to work on it (an LLM runtime shows the text to its model; a deterministic engine may rebuild its own state from
``request``, the natural-language request the text was generated from, when that reproduces the text exactly).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

WORKING_TEMPLATE_KEY = "iac_code.workingTemplate"


@dataclass(frozen=True)
class WorkingTemplate:
    """A template and where it came from: its ``text``, ``filename``, ``media_type``, the ``request`` it was
    generated from (``""`` when unknown) and its ``source`` (e.g. ``pipeline:selling``)."""

    text: str
    filename: str
    media_type: str
    request: str = ""
    source: str = ""

    @property
    def sha256(self) -> str:
        """The SHA-256 of ``text`` (hex): what identifies this version of the template."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def set_working_template(session: dict[str, Any], template: WorkingTemplate) -> None:
    """Make ``template`` the context's working template (persisted with the session)."""
    session[WORKING_TEMPLATE_KEY] = asdict(template)


def working_template(session: Mapping[str, Any]) -> WorkingTemplate | None:
    """The context's working template, if one was set."""
    value = session.get(WORKING_TEMPLATE_KEY)
    if not isinstance(value, Mapping) or not isinstance(value.get("text"), str):
        return None
    return WorkingTemplate(text=value["text"], filename=str(value.get("filename", "")),
                           media_type=str(value.get("media_type", "")), request=str(value.get("request", "")),
                           source=str(value.get("source", "")))
