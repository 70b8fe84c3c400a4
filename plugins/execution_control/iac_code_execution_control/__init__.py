"""Execution control for the iac-code A2A server (``urn:iac-code:a2a:execution-control:v1``).

A client that is about to lose its connection pauses the execution of its context: the running turn
stops at its next safe point (between tool calls, before a permission question), the pause is made
durable, and no new task starts on the context until the client resumes it, terminates it, or the
reconnect deadline passes (then it is terminated with ``disconnect_timeout``). Also the session routes
``/iac-code/session/ensure-restored`` and ``/iac-code/session/recovery``. See docs/execution-control.md.
"""
