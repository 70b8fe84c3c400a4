"""Reading the user's answers: §3's question matching and §2.3's candidate selection."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def match_question(text: str, options: Sequence[Mapping[str, Any]], allow_free_text: bool = True) -> dict[str, Any]:
    """§3's order: a 1-based number, an exact ``id`` or ``label``, free text, else the text as ``selectedLabel``.

    Returns ``selectedId``, ``selectedLabel``, ``freeText`` (unmatched fields ``""``).
    """
    trimmed = text.strip()
    if re.fullmatch(r"[0-9]+", trimmed):
        number = int(trimmed)
        if 1 <= number <= len(options):
            option = options[number - 1]
            return {"selectedId": str(option["id"]), "selectedLabel": str(option["label"]), "freeText": ""}
    for option in options:
        if trimmed in (str(option["id"]), str(option["label"])):
            return {"selectedId": str(option["id"]), "selectedLabel": str(option["label"]), "freeText": ""}
    if allow_free_text:
        return {"selectedId": "", "selectedLabel": "", "freeText": text}
    return {"selectedId": "", "selectedLabel": text, "freeText": ""}


@dataclass(frozen=True)
class Selection:
    """A parsed selection answer: the chosen option, or why the answer chose nothing."""

    option: Mapping[str, Any] | None
    error: str = ""
    parameter_overrides: Mapping[str, Any] | None = None


_INDEX = re.compile(r"^(?:方案|选择|选|candidate|plan|option|no\.?|#)?\s*(?:#|第|no\.?)?\s*(\d+)\s*(?:个|号)?(?:方案)?$",
                    re.IGNORECASE)


def parse_selection(text: str, options: Sequence[Mapping[str, Any]]) -> Selection:
    """§2.3's answers: the JSON text, ``方案 2`` / ``candidate 2`` / ``plan #2`` / ``选 2`` / ``2``, or a bare name.

    Indices are the options' ``candidate_index`` (1-based). ``error`` is a message id: ``unknown_index``,
    ``unknown_name`` or ``unreadable``.
    """
    trimmed = text.strip()
    by_index = {int(o["candidate_index"]): o for o in options}
    if trimmed.startswith("{"):
        try:
            answer = json.loads(trimmed)
        except ValueError:
            return Selection(None, "unreadable")
        if not isinstance(answer, dict):
            return Selection(None, "unreadable")
        overrides = answer.get("parameter_overrides") if isinstance(answer.get("parameter_overrides"), dict) else None
        index = answer.get("selected_candidate_index")
        if isinstance(index, int) and not isinstance(index, bool):
            option = by_index.get(index)
            return Selection(option, "" if option else "unknown_index", overrides)
        name = answer.get("selected_candidate_name")
        if isinstance(name, str) and name.strip():
            option = _by_name(name, options)
            return Selection(option, "" if option else "unknown_name", overrides)
        return Selection(None, "unreadable")
    match = _INDEX.match(trimmed)
    if match:
        option = by_index.get(int(match[1]))
        return Selection(option, "" if option else "unknown_index")
    option = _by_name(trimmed, options)
    return Selection(option, "" if option else "unreadable")


def _by_name(name: str, options: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    wanted = name.strip().casefold()
    for option in options:
        if str(option["name"]).casefold() == wanted:
            return option
    return None
