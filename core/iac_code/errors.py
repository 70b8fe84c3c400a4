"""Errors the kernel raises at start-up; the CLI prints them as one line."""

from __future__ import annotations


class StartupError(RuntimeError):
    """A configuration or installation problem that stops the server from starting.

    The message is shown to the operator as-is, so it names the offending key,
    plugin or extra and says what to do.
    """
