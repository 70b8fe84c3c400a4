"""Errors the kernel raises at start-up; the CLI prints them as one line."""

from __future__ import annotations


class StartupError(RuntimeError):
    """A configuration or installation problem that stops the server from starting.

    The message is shown to the operator as-is, so it names the offending key,
    plugin or extra and says what to do.
    """


class ConfigProblems(StartupError):
    """Every problem found in the configuration before anything started: one line each.

    Raised by the validation phase (:func:`iac_code.server.validation.check_startup`) and by the
    loader for keys that do not validate; the CLI prints each line and exits 2.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)
