"""A line typed at the terminal, with Ctrl-C honoured at every moment of the question.

``input()`` loses a Ctrl-C that arrives after the prompt is on screen but before the interpreter
blocks in ``read(2)``: the signal is handled in that window, the read is then not interrupted, and
the question waits for a line that never comes. Waiting with ``select`` on the terminal and on a
wake-up pipe, which the interpreter writes to on every signal, closes the window.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any


def ask_line(console: Any, prompt: str) -> str:
    """Print ``prompt`` and return the line typed (without its newline).

    Ctrl-C raises ``KeyboardInterrupt`` and end of input ``EOFError``, whenever they come. Where no
    terminal is at hand (or off the main thread), this is rich's ``Console.input``.
    """
    fd = _terminal_fd()
    if fd is None:
        return str(console.input(prompt, markup=False))
    console.print(prompt, markup=False, end="")
    console.file.flush()
    with _signal_pipe() as wake:
        while True:
            ready, _, _ = select.select([fd, wake], [], [])
            # a signal's Python handler runs between these bytecodes: Ctrl-C raises KeyboardInterrupt here
            if fd in ready:
                data = os.read(fd, 4096)  # a terminal in canonical mode hands over one line per read
                if not data:
                    raise EOFError
                return data.decode(sys.stdin.encoding or "utf-8", errors="replace").rstrip("\r\n")
            os.read(wake, 512)  # another signal (a window resize, say): keep waiting


def _terminal_fd() -> int | None:
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if os.isatty(fd) else None


@contextlib.contextmanager
def _signal_pipe() -> Iterator[int]:
    """A pipe the interpreter writes a byte to whenever a signal arrives; yields its read end."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end)
    try:
        yield read_end
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
