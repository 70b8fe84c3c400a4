"""The answer check before a turn starts: a message carrying a resource-selection ``inputResponse`` that cannot be
taken is refused with ``-32602 resource_selection_resume_invalid: <reason>``, and nothing changes (a turn gate's
``admit_message``; the gate holds no turn).

With cloud queries configured (credentials), a first answer's value must also be one the cloud has for the
question's selector and ``associationPropertyMetadata`` (:meth:`~iac_code_resource_selector.cloud.CloudQuery.find`);
else only the selector's pattern is checked (always for a derived selector). A replay of a taken answer is not
queried again. On a server whose runtime cannot resume the call (not ``agent-runtime: llm``, e.g. restarted with
the offline runtime) every answer is refused with ``runtime is unavailable`` and the question keeps waiting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iac_code.api import TurnPoint
from iac_code_resource_selector import answers
from iac_code_resource_selector.cloud import CloudQuery, QueryError
from iac_code_resource_selector.owners import DIFFERENT_OWNER, TurnOwners, owner_ref
from iac_code_resource_selector.store import SelectionStore

UNCHECKED = "selector value cannot be checked now"


class AnswerGate:
    """Refuses bad answers to a selection (see the module docstring); every other turn goes on untouched."""

    def __init__(self, store: SelectionStore, query: CloudQuery | None = None, runtime_ready: bool = True,
                 owners: TurnOwners | None = None) -> None:
        self.store = store
        self.query = query
        self.runtime_ready = runtime_ready
        self.owners = owners if owners is not None else TurnOwners()

    def admit(self, owner: str, context_id: str, task_id: str) -> str | None:
        self.owners.started(task_id, owner)  # the tool's checkpoint names this turn's owner
        return None

    async def admit_message(self, owner: str, context_id: str, task_id: str,
                            metadata: Mapping[str, Any]) -> str | None:
        if not answers.is_selection(metadata):
            return None
        try:
            answer, record = answers.check(self.store, task_id, context_id, metadata.get("inputResponse"),
                                           owner=owner_ref(owner))
        except answers.Invalid as exc:
            return str(exc) if str(exc) == DIFFERENT_OWNER else answers.PREFIX + str(exc)
        if not self.runtime_ready:
            return answers.PREFIX + "runtime is unavailable"
        if (self.query is None or answer["status"] != "selected" or record["state"] != "pending"
                or record["selector"].get("source") is not None):
            return None
        selector = record["selector"]
        try:
            found = await self.query.find(str(selector["id"]), selector.get("associationPropertyMetadata") or {},
                                          answer["value"])
        except QueryError as exc:
            return f"{answers.PREFIX}{UNCHECKED} ({exc})"
        return None if found is not None else answers.PREFIX + "selector value is invalid"

    async def safe_point(self, point: TurnPoint) -> None:
        return None

    def waiting(self, point: TurnPoint, waiting: bool) -> None:
        return None

    async def turn_ended(self, point: TurnPoint, status: str) -> None:
        return None

    def metadata(self, owner: str, context_id: str) -> Mapping[str, Any] | None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
