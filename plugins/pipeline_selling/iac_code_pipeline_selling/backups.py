"""Critical backups of pipeline sessions (seed: ``backupBlocked``, ``backup_committed``; since-0.13 §2.4, §2.5).

With a backup directory configured (``backup-dir``, or ``IAC_CODE_CONFIG_BACKUP_DIR``; off by default), a pipeline
publishes nothing that a client may act on before the session it belongs to is backed up. The *protected
publications* are the ``input_required`` a turn stops on (gate ``input_required``), the terminal
``pipeline_completed`` / ``pipeline_failed`` / ``pipeline_canceled`` (gate ``terminal``) and
``pipeline_handoff_ready`` (gate ``handoff_ready``). Before each one, under the journal's lock:

1. the publication is built with the sequence it will have, and a snapshot of the session (the run's state, the
   conversation, every journaled event, and the publication itself marked ``visibility: "pending_backup"``) is
   written atomically (temp file, fsync, rename; ``0600`` in ``0700`` directories) as the context's next
   *generation* ``<dir>/pipeline/<context key>/<generation>.json`` (the newest three are kept);
2. on success ``backup_committed`` (no ``status``; ``{"committedEventId","committedEventType","committedSequence"}``)
   and the publication, with ``visibility: "committed"``, are journaled in one write and published in that order
   (the ack first: a turn's question is merged into its last status, so nothing can follow it);
3. on failure ``backup_blocked`` (status ``input_required``, ``{"reason": <gate>, "error", "recoverable": true}``,
   the error sanitised: never a path) is journaled and published instead, the turn's last status carries
   ``metadata.iac_code.backupBlocked`` and the run stops there (:class:`BackupBlocked`). The withheld publication
   is recorded in the run's state; the next message on the context, whatever its text, retries it
   (:meth:`Backups.drive`): success publishes ``backup_committed`` and the publication, failure ``backup_blocked``
   again. Sequences stay gapless: a blocked publication never took a number.

With a staging directory as well (``backup-tmp-dir`` / ``IAC_CODE_CONFIG_BACKUP_TMP_DIR``), step 1 writes the
snapshot there and ``backup_committed`` confirms that local, immutable snapshot (recovery in the same sandbox);
a background copy then puts the newest generation into the backup directory (recovery elsewhere). A failed copy
is logged, reported once per outage as a ``pipeline_warning`` (``backup_copy_failed``) at the next protected
publication, and retried by that publication's copy. Without a staging directory ``backup_committed`` confirms
the backup directory itself.

After the handoff, a chat turn on the context ends with a non-blocking checkpoint (kind ``normal_turn_end``):
written in the background, a failure only logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import hashlib
import json
import logging
import os
import re
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from iac_code.api import PipelineServices, Progress, TurnRequest, atomic_write, private_dir, read_private_file, spawn
from iac_code_pipeline_selling.journal import Journal, JournalStore, envelope, now_iso, once_key

logger = logging.getLogger(__name__)

BACKUP_DIR_ENV = "IAC_CODE_CONFIG_BACKUP_DIR"
BACKUP_TMP_DIR_ENV = "IAC_CODE_CONFIG_BACKUP_TMP_DIR"
SNAPSHOT_SCHEMA_VERSION = "1.0"
KEEP_GENERATIONS = 3
GATES = {"input_required": "input_required", "pipeline_completed": "terminal", "pipeline_failed": "terminal",
         "pipeline_canceled": "terminal", "pipeline_handoff_ready": "handoff_ready"}
_GENERATION = re.compile(r"[0-9]{10}\.json")

TEXTS = {
    "en": {
        "blocked": ("The critical session backup failed ({error}), so this step's result is held back until it is "
                    "backed up. Send any message to retry the backup."),
        "copy_failed": ("Session backup {generation} is committed locally but could not be copied to the backup "
                        "directory ({error}); the copy is retried at the next protected publication."),
    },
    "zh": {
        "blocked": "关键会话备份失败（{error}），此步骤的结果在备份完成前不会发布。发送任意消息即可重试备份。",
        "copy_failed": "会话备份 {generation} 已在本地提交，但未能复制到备份目录（{error}）；将在下一次受保护的发布时重试复制。",
    },
}


def _text(language: str, key: str, **values: Any) -> str:
    table = TEXTS.get(language, TEXTS.get(language.split("-")[0].lower(), TEXTS["en"]))
    return table[key].format(**values)


class RunTurn(Protocol):
    """What a gate uses of a pipeline's turn (:class:`iac_code_pipeline_selling.runner.RunTurn`)."""

    turn: TurnRequest
    state: dict[str, Any]
    out: asyncio.Queue[Any]
    layout: Any
    language: str
    pipeline: Any
    said: bool
    new_round: bool

    def say(self, message: str, *, narrate: bool = True) -> str: ...

    def narration_events(self, delta: str, first: int) -> list[dict[str, Any]]: ...

    async def emit(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...

    async def ask(self, *args: Any, **kwargs: Any) -> None: ...


class BackupConfig(BaseModel):
    """The keys of critical backups: where session snapshots go before a protected publication (off when unset)."""

    model_config = ConfigDict(extra="forbid")

    backup_dir: str = Field(
        "", description="Directory of the critical session backups of pipeline mode (off when empty); falls back "
                        f"to {BACKUP_DIR_ENV}.")
    backup_tmp_dir: str = Field(
        "", description="Local staging directory: backups are committed here and copied to backup-dir in the "
                        f"background (needs backup-dir); falls back to {BACKUP_TMP_DIR_ENV}.")


def _setting(config: Any, key: str, env: str, environ: Mapping[str, str]) -> str:
    return str(getattr(config, key, "") or "").strip() or str(environ.get(env, "") or "").strip()


def config_problems(config: Any, environ: Mapping[str, str] | None = None) -> list[str]:
    """What is wrong with the backup settings: a staging directory without a backup directory does nothing."""
    env = os.environ if environ is None else environ
    if _setting(config, "backup_tmp_dir", BACKUP_TMP_DIR_ENV, env) and not _setting(
            config, "backup_dir", BACKUP_DIR_ENV, env):
        return [f"backup-tmp-dir (or {BACKUP_TMP_DIR_ENV}) is set but backup-dir (or {BACKUP_DIR_ENV}) is not: "
                "set the backup directory the staged backups are copied to, or remove the staging directory."]
    return []


@dataclass(frozen=True)
class BackupSettings:
    """Where backups go: ``directory`` (``None``: backups are off) and, optionally, the local ``staging`` directory."""

    directory: Path | None = None
    staging: Path | None = None

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str] | None = None) -> BackupSettings:
        """The settings of a server's configuration, the environment filling keys it leaves empty."""
        env = os.environ if environ is None else environ
        directory = _setting(config, "backup_dir", BACKUP_DIR_ENV, env)
        staging = _setting(config, "backup_tmp_dir", BACKUP_TMP_DIR_ENV, env)
        if not directory:
            return cls()
        return cls(Path(directory), Path(staging) if staging else None)

    @property
    def enabled(self) -> bool:
        return self.directory is not None


class BackupBlocked(Exception):
    """A protected publication's backup failed: ``backup_blocked`` is published and the run stops for this turn."""


_REASONS = {
    errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "the backup location is not a directory", errno.EEXIST: "the backup location is not a directory",
    errno.EISDIR: "the backup location is not writable", errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system", errno.EDQUOT: "disk quota exceeded",
    errno.ENOENT: "the backup location does not exist", errno.EIO: "input/output error",
}


def describe(error: BaseException) -> str:
    """A failed write, said without any path: what the OS reported, or the kind of failure."""
    if isinstance(error, OSError):
        if error.errno in _REASONS:
            return _REASONS[error.errno]
        return os.strerror(error.errno).lower() if error.errno else "input/output error"
    return "unexpected error"


def _key(context_id: str) -> str:
    return hashlib.sha256(context_id.encode("utf-8")).hexdigest()[:40]


def _context_dir(root: Path, context_id: str, *, create: bool) -> Path:
    """``<root>/pipeline/<context key>``; created owner-only (the configured root is created, never chmod-ed)."""
    path = root / "pipeline" / _key(context_id)
    if create:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        private_dir(root / "pipeline")
        private_dir(path)
    return path


def _generations(directory: Path) -> list[str]:
    try:
        return sorted(name for name in os.listdir(directory) if _GENERATION.fullmatch(name))
    except OSError:
        return []


def _prune(directory: Path) -> None:
    for name in _generations(directory)[:-KEEP_GENERATIONS]:
        with contextlib.suppress(OSError):
            os.unlink(directory / name)


def write_generation(root: Path, context_id: str, generation: int, data: bytes) -> Path:
    """Write one snapshot generation atomically (owner-only) and drop all but the newest few. Blocking."""
    directory = _context_dir(root, context_id, create=True)
    path = directory / f"{generation:010d}.json"
    atomic_write(path, data)
    _prune(directory)
    return path


def copy_newest(staging: Path, root: Path, context_id: str) -> int | None:
    """Copy the newest staged generation of a context into the backup directory; its number (``None``: none staged).
    Blocking."""
    names = _generations(_context_dir(staging, context_id, create=False))
    if not names:
        return None
    data = read_private_file(_context_dir(staging, context_id, create=False) / names[-1])
    if data is None:
        return None
    write_generation(root, context_id, int(names[-1][:-5]), data)
    return int(names[-1][:-5])


class Backups:
    """The critical backups of one server's pipeline sessions (shared by its pipelines, like their journals)."""

    _shared: weakref.WeakKeyDictionary[JournalStore, Backups] = weakref.WeakKeyDictionary()

    def __init__(self, settings: BackupSettings, store: JournalStore) -> None:
        self.settings = settings
        self.store = store
        self._copies: dict[str, asyncio.Task[None]] = {}  # context → its latest background copy
        self._failed: dict[str, tuple[int, str]] = {}  # context → (generation, error) of its last failed copy
        self._reported: set[str] = set()  # contexts whose current copy outage was reported

    @classmethod
    def shared(cls, services: PipelineServices, store: JournalStore) -> Backups:
        """The backups of the server ``store`` belongs to (made on first use from its configuration)."""
        backups = cls._shared.get(store)
        if backups is None:
            settings = BackupSettings.from_config(getattr(services.context, "config", None))
            backups = cls._shared[store] = cls(settings, store)
        return backups

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    # ------------------------------------------------------------------ the gate

    async def publish(self, run: RunTurn, event_type: str, resume: Mapping[str, Any],
                      build: Callable[[int], dict[str, Any]],
                      on_event: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Publish a protected event behind its critical backup (see the module); ``resume`` says how to publish it
        again when the backup fails (``{"op": "ask", ...}`` or ``{"op": "finish", ...}``). Raises
        :class:`BackupBlocked` after publishing ``backup_blocked``."""
        gate = GATES[event_type]
        context_id = run.turn.context_id
        await self._report_copy_failure(run)
        async with self.store.locked(context_id) as journal:
            first = journal.last_sequence + 1
            # A question's text is withheld with it: its narration (display events) is part of the gated publication,
            # journaled before the ack so the stream keeps sequence order.
            said = str(resume.get("said", "")) if resume.get("op") == "ask" else ""
            before = copy.deepcopy(run.state.get("narration")), run.new_round
            narrated = run.narration_events((("\n\n" if run.said else "") + said) if said else "", first)
            first += len(narrated)
            event = {**build(first + 1), "visibility": "committed"}
            key = once_key(event)
            if key is not None and key in journal.published:  # published before (a redone step): nothing to gate
                self._restore_narration(run, before)
                return journal.published[key]
            ack = self._envelope(run, first, "backup_committed", None, {
                "committedEventId": event["eventId"], "committedEventType": event_type,
                "committedSequence": event["sequence"]})
            generation = int(run.state.get("backupGeneration", 0)) + 1
            data = self._snapshot(run.turn, run.state, journal, kind=gate, generation=generation,
                                  pending=[*narrated, ack, {**event, "visibility": "pending_backup"}])
            root = self.settings.staging or self.settings.directory
            assert root is not None
            try:
                await asyncio.to_thread(write_generation, root, context_id, generation, data)
            except Exception as error:
                self._restore_narration(run, before)
                await self._block(run, journal, first - len(narrated), gate, resume, error)
                raise BackupBlocked(gate) from None
            run.state["backupGeneration"] = generation
            await asyncio.to_thread(journal.append_many, [*narrated, ack, event])
            run.state["lastSequence"] = max(int(run.state.get("lastSequence", 0)), event["sequence"])
            for narration in narrated:
                run.out.put_nowait(Progress({"pipeline": narration}))
            run.out.put_nowait(Progress({"pipeline": ack}))
            if said:
                run.say(said, narrate=False)
            on_event(event)
        self._copy_later(context_id)
        return event

    async def _block(self, run: RunTurn, journal: Journal, sequence: int, gate: str, resume: Mapping[str, Any],
                     error: BaseException) -> None:
        blocked = {"reason": gate, "error": f"The session backup could not be written: {describe(error)}.",
                   "recoverable": True}
        logger.warning("Critical backup of a pipeline session failed before its %s publication: %s", gate,
                       describe(error))
        said = _text(run.language, "blocked", error=describe(error))
        narrated = run.narration_events(("\n\n" if run.said else "") + said, sequence)  # before it: sequence order
        run.state["backupBlocked"] = {**blocked, "resume": dict(resume)}
        await run.pipeline.save_state(run.turn.context_id, run.state)
        event = self._envelope(run, sequence + len(narrated), "backup_blocked", "input_required", blocked)
        await asyncio.to_thread(journal.append_many, [*narrated, event])
        run.state["lastSequence"] = max(int(run.state.get("lastSequence", 0)), event["sequence"])
        for narration in narrated:
            run.out.put_nowait(Progress({"pipeline": narration}))
        run.say(said, narrate=False)
        run.out.put_nowait(Progress({"pipeline": event, "backupBlocked": blocked}, final=True))

    @staticmethod
    def _restore_narration(run: RunTurn, before: tuple[Any, bool]) -> None:
        """Undo :meth:`RunTurn.narration_events`' round bookkeeping for narration that was not published."""
        narration, run.new_round = before
        if narration is None:
            run.state.pop("narration", None)
        else:
            run.state["narration"] = narration

    @staticmethod
    def _envelope(run: RunTurn, sequence: int, event_type: str, status: str | None,
                  data: Mapping[str, Any]) -> dict[str, Any]:
        turn = run.turn
        return envelope(sequence, event_type=event_type, scope="pipeline", status=status, data=data,
                        run_id=run.state["pipelineRunId"], task_id=turn.task_id, context_id=turn.context_id,
                        pipeline_name=run.layout.name, verbatim=True)

    @staticmethod
    def _snapshot(turn: TurnRequest, state: Mapping[str, Any], journal: Journal, *, kind: str, generation: int,
                  pending: Sequence[Mapping[str, Any]] = (), exchange: Sequence[Mapping[str, Any]] = ()) -> bytes:
        """The session as a restore needs it: state, conversation, journal, and the publications this backup gates."""
        document = {
            "schemaVersion": SNAPSHOT_SCHEMA_VERSION, "kind": kind, "generation": generation, "createdAt": now_iso(),
            "contextId": turn.context_id, "taskId": turn.task_id, "pipelineName": state.get("pipelineName", ""),
            "pipelineRunId": state.get("pipelineRunId", ""), "state": state,
            "history": [dict(h) for h in turn.history] + [dict(h) for h in exchange],
            "journal": {"lastSequence": journal.last_sequence, "events": journal.events},
            "pending": list(pending),
        }
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    # ------------------------------------------------------------------ the retry

    async def drive(self, run: RunTurn, drive: Callable[[RunTurn], Awaitable[None]]) -> None:
        """Run the turn: the withheld publication again when the last backup was blocked (whatever the message
        says), else ``drive(run)``; a blocked backup ends the turn quietly (its ``backup_blocked`` is out)."""
        try:
            blocked = run.state.get("backupBlocked")
            resume = blocked.get("resume") if isinstance(blocked, Mapping) else None
            if not isinstance(resume, Mapping) or resume.get("op") not in ("ask", "finish"):
                run.state.pop("backupBlocked", None)
                await drive(run)
                return
            if resume["op"] == "ask":
                await run.ask(str(resume["step_id"]), dict(resume["data"]), str(resume["said"]),
                              required=bool(resume.get("required", True)), verbatim=bool(resume.get("verbatim")))
            else:
                await run.pipeline.finish(run, str(resume["outcome"]), str(resume["summary"]))
            run.state.pop("backupBlocked", None)
            await run.pipeline.save_state(run.turn.context_id, run.state)
        except BackupBlocked:
            return

    # ------------------------------------------------------------------ the normal-turn checkpoint

    def checkpoint(self, turn: TurnRequest, state: dict[str, Any], answer: str) -> None:
        """After a chat turn on a handed-off context: a non-blocking snapshot (written in the background; a failure
        is logged, nothing waits for it or is withheld)."""
        if not self.enabled:
            return
        generation = int(state.get("backupGeneration", 0)) + 1
        state["backupGeneration"] = generation
        exchange = [{"role": "user", "text": turn.prompt}, {"role": "assistant", "text": answer}]
        data = self._snapshot(turn, state, self.store.journal(turn.context_id), kind="normal_turn_end",
                              generation=generation, exchange=exchange)
        spawn(self._write_checkpoint(turn.context_id, generation, data), name="pipeline-backup-checkpoint")

    async def _write_checkpoint(self, context_id: str, generation: int, data: bytes) -> None:
        root = self.settings.staging or self.settings.directory
        assert root is not None
        try:
            await asyncio.to_thread(write_generation, root, context_id, generation, data)
        except Exception as error:
            logger.warning("Non-blocking checkpoint of a pipeline session failed: %s", describe(error))
            return
        self._copy_later(context_id)

    # ------------------------------------------------------------------ the background copy (staging mode)

    def _copy_later(self, context_id: str) -> None:
        if self.settings.staging is None:
            return
        previous = self._copies.get(context_id)
        task = spawn(self._copy(context_id, previous), name="pipeline-backup-copy")
        self._copies[context_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._copies.get(context_id) is done:
                del self._copies[context_id]

        task.add_done_callback(forget)

    async def _copy(self, context_id: str, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # one copy per context at a time, in order
        staging, directory = self.settings.staging, self.settings.directory
        assert staging is not None and directory is not None
        try:
            await asyncio.to_thread(copy_newest, staging, directory, context_id)
        except Exception as error:
            names = _generations(_context_dir(staging, context_id, create=False))
            self._failed[context_id] = (int(names[-1][:-5]) if names else 0, describe(error))
            logger.warning("Background copy of a pipeline session backup to the backup directory failed: %s",
                           describe(error))
            return
        self._failed.pop(context_id, None)
        self._reported.discard(context_id)

    async def _report_copy_failure(self, run: RunTurn) -> None:
        """A ``pipeline_warning`` for a failed background copy, once per outage (the new commit's copy retries)."""
        context_id = run.turn.context_id
        failed = self._failed.get(context_id)
        if failed is None or context_id in self._reported:
            return
        self._reported.add(context_id)
        generation, error = failed
        await run.emit("pipeline_warning", "pipeline", "working", {
            "code": "backup_copy_failed", "message": _text(run.language, "copy_failed", generation=generation,
                                                           error=error),
            "source": "backup", "backupGeneration": generation})


__all__ = ["BACKUP_DIR_ENV", "BACKUP_TMP_DIR_ENV", "BackupBlocked", "BackupConfig", "BackupSettings", "Backups",
           "config_problems", "copy_newest", "describe", "write_generation"]
