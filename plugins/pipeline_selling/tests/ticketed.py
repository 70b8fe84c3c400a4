"""A test helper: the offline runtime plugin as it is, except that its engine's template generation waits for a
ticket the test hands out, so a run is held inside ``evaluate_candidates`` deterministically (no sleeps). The
server runs with ``disabled-plugins: [runtime-offline]`` and :class:`TicketedOffline` registered in its place
(:func:`ticketed_settings`); the ``ticketed`` fixture (conftest) gives a fresh one."""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Any

from iac_code.api import IacEngineSpec, hookimpl


class Tickets:
    """Template generations wait here, one ticket each (worker threads), until the test releases tickets."""

    def __init__(self) -> None:
        self._semaphore = threading.Semaphore(0)
        self.entered = threading.Event()  # a generation waits for its ticket

    def take(self) -> None:
        self.entered.set()
        if not self._semaphore.acquire(timeout=60):
            raise RuntimeError("no ticket within 60 s")

    def release(self, count: int = 1) -> None:
        for _ in range(count):
            self._semaphore.release()


class TicketedEngine:
    """The offline engine, with ``generate`` waiting for a ticket."""

    def __init__(self, engine: Any, tickets: Tickets) -> None:
        self._engine = engine
        self._tickets = tickets
        self.name = engine.name

    def understand(self, prompt: str, language: str = "en") -> Any:
        return self._engine.understand(prompt, language)

    def generate(self, prompt: str, language: str = "en") -> Any:
        self._tickets.take()
        return self._engine.generate(prompt, language)

    def review(self, template: str, language: str = "en") -> Any:
        return self._engine.review(template, language)


class TicketedOffline:
    """The ``runtime-offline`` plugin's hooks as they are (its runtime, its tools), its engine ticketed; the
    server runs with ``disabled-plugins: [runtime-offline]`` and this plugin in its place."""

    def __init__(self) -> None:
        self.offline = next(e for e in entry_points(group="iac_code") if e.name == "runtime-offline").load()
        self.tickets = Tickets()

    @hookimpl
    def iac_code_agent_runtimes(self) -> Any:
        return self.offline.iac_code_agent_runtimes()

    @hookimpl
    def iac_code_tools(self) -> Any:
        return self.offline.iac_code_tools()

    @hookimpl
    def iac_code_iac_engines(self) -> list[IacEngineSpec]:
        real = self.offline.iac_code_iac_engines()[0]
        return [IacEngineSpec(name="offline", create=lambda context: TicketedEngine(real.create(context), self.tickets),
                              description="The offline engine, generation ticketed by a test.")]


def ticketed_settings(**more: Any) -> dict[str, Any]:
    """Server settings for :class:`TicketedOffline`: pipeline mode, the offline runtime plugin replaced by it."""
    return {"mode": "pipeline", "disabled-plugins": ["runtime-offline"], **more}
