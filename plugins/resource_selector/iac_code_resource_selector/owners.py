"""Who started each task's turn, so that a selection checkpoint can name its owner (``ownerRef``).

The answer gate sees the caller's owner scope when a turn starts (:meth:`~iac_code_resource_selector.gate.AnswerGate.
admit`); the tool, which does not, takes it from here when it writes the question's checkpoint. Only a digest of the
owner scope is kept (``sha256:<hex>``), never the credential it comes from. One registry per persistence directory,
in memory, bounded; the checkpoint is what lasts.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from pathlib import Path

LIMIT = 4096
DIFFERENT_OWNER = "Task belongs to a different owner"


def owner_ref(owner: str) -> str:
    """The digest a checkpoint keeps of an owner scope."""
    return "sha256:" + hashlib.sha256(owner.encode()).hexdigest()


class TurnOwners:
    """The owner digest of recently started turns' tasks (the newest :data:`LIMIT`)."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, str] = OrderedDict()

    def started(self, task_id: str, owner: str) -> None:
        if not task_id:
            return
        self._owners[task_id] = owner_ref(owner)
        self._owners.move_to_end(task_id)
        while len(self._owners) > LIMIT:
            self._owners.popitem(last=False)

    def of(self, task_id: str) -> str | None:
        return self._owners.get(task_id)


_REGISTRIES: dict[Path, TurnOwners] = {}


def registry(state_dir: Path) -> TurnOwners:
    """The registry shared by the tool and the gate of the server persisting under ``state_dir``."""
    return _REGISTRIES.setdefault(Path(state_dir).resolve(), TurnOwners())
