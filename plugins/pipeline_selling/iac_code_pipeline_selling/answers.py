"""Reading the user's answers: §3's question matching (the kernel's ``match_question``) and §2.3's candidate
selection."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from iac_code.api import match_question as match_question  # §3's rules, shared with the ask_user_question tool


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


# --------------------------------------------------------------------------- §2.2 deployment_confirmation

ACTIONS = ("confirm", "adjust", "reselect", "cancel")
_PUNCT = " \t\r\n.!?,;:。！？，；：、~"
_CONFIRM = {"confirm", "confirmed", "yes", "y", "ok", "okay", "deploy", "deploy it", "go", "go ahead", "yes, deploy",
            "yes deploy", "confirm and deploy", "looks good", "确认", "确定", "是", "好", "好的", "可以", "部署",
            "确认部署", "开始部署", "没问题"}
_CANCEL = ("cancel", "stop", "abort", "never mind", "nevermind", "quit", "don't deploy", "do not deploy",
           "取消", "算了", "不部署", "不要部署", "停止", "放弃")
_RESELECT = ("reselect", "another", "other one", "different", "choose again", "pick again", "select again",
             "go back", "换一个", "换个", "重新选择", "重选", "换方案", "其他方案", "别的方案", "另一个")
_PARAM = re.compile(r"([A-Za-z_][\w.\-]*)\s*(?:=|:|：| to )\s*([^\s,;，；]+)")
_REJECT = {"none", "no", "cancel", "reject", "none of them", "neither", "stop", "abort", "quit",
           "取消", "都不要", "都不", "不要", "拒绝", "算了", "一个都不要", "都不选"}


@dataclass(frozen=True)
class Confirmation:
    """A parsed ``deployment_confirmation`` answer: its ``action`` (``""``: none recognised) and overrides."""

    action: str
    parameter_overrides: Mapping[str, Any] | None = None
    error: str = ""


def _value(raw: str) -> Any:
    if re.fullmatch(r"-?[0-9]+", raw):
        return int(raw)
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw.strip("\"'")


def _contains(text: str, words: Sequence[str]) -> bool:
    for word in words:
        if word.isascii():
            if re.search(rf"(?<![\w']){re.escape(word)}(?![\w'])", text):
                return True
        elif word in text:
            return True
    return False


def parse_confirmation(text: str, options: Sequence[Mapping[str, Any]]) -> Confirmation:
    """§2.2's answers: the JSON text ``{"action", "parameter_overrides"?}``, a bare number (option *n*'s ``action``),
    or natural language (English or Chinese): confirm / cancel / reselect words, else ``key=value`` parameters
    (→ ``adjust``). ``confirm`` only on an explicit confirmation; ``error`` is a message id when nothing matched."""
    trimmed = text.strip()
    if trimmed.startswith("{"):
        try:
            answer = json.loads(trimmed)
        except ValueError:
            return Confirmation("", error="confirm_unreadable")
        if not isinstance(answer, dict) or answer.get("action") not in ACTIONS:
            return Confirmation("", error="confirm_unreadable")
        overrides = answer.get("parameter_overrides")
        if overrides is not None and not isinstance(overrides, dict):
            return Confirmation("", error="confirm_unreadable")
        return Confirmation(str(answer["action"]), overrides)
    if re.fullmatch(r"[0-9]+", trimmed):
        number = int(trimmed)
        if 1 <= number <= len(options):
            return Confirmation(str(options[number - 1]["action"]))
        return Confirmation("", error="confirm_unknown_number")
    low = trimmed.lower().strip(_PUNCT)
    if low in _CONFIRM:
        return Confirmation("confirm")
    if _contains(low, _CANCEL):
        return Confirmation("cancel")
    if _contains(low, _RESELECT):
        return Confirmation("reselect")
    overrides = {m[1]: _value(m[2]) for m in _PARAM.finditer(trimmed)}
    if overrides:
        return Confirmation("adjust", overrides)
    return Confirmation("", error="confirm_unreadable")


def is_rejection(text: str) -> bool:
    """The user turns every candidate down (``none``, ``cancel``, ``都不要``, …)."""
    return text.strip().lower().strip(_PUNCT) in _REJECT

