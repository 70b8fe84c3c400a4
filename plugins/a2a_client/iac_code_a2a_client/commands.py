"""``iac-code a2a-client``: call remote A2A agents from a terminal or a script.

Every subcommand resolves its settings (:mod:`iac_code_a2a_client.options`), opens an a2a-sdk
client to the agent (:mod:`iac_code_a2a_client.connect`) and prints the result as rich text
or, with ``--output json``, as JSON. Failures print one line on stderr and exit with the
code :class:`~iac_code_a2a_client.errors.ExitCode` documents (docs/client.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
import traceback
import warnings
from collections.abc import Callable, Coroutine, Iterator
from functools import wraps
from typing import Any

import click

from iac_code_a2a_client import events as ev
from iac_code_a2a_client.errors import ClientError, ExitCode, classify
from iac_code_a2a_client.options import Settings, load_client_config
from iac_code_a2a_client.terminal_input import ask_line

logger = logging.getLogger("iac_code_a2a_client")

MISSING_DEPENDENCIES = "A2A client dependencies are missing. Install with: pip install 'iac-code[a2a]'"
OUTPUTS = ("text", "table", "json")


# ----------------------------------------------------------------------------- shared options


def _auth_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--token", default="", help="Bearer token (env IACCODE_A2A_HTTP_TOKEN)."),
        click.option("--basic-username", default="", help="Basic auth user (env IACCODE_A2A_BASIC_USERNAME)."),
        click.option("--basic-password", default="", help="Basic auth password (env IACCODE_A2A_BASIC_PASSWORD)."),
        click.option("--api-key", default="", help="API key (env IACCODE_A2A_API_KEY)."),
        click.option("--api-key-header", default="", help="API key header (default X-API-Key)."),
    ]):
        f = option(f)
    return f


def _connection_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--url", default="", help="The agent's URL (base or JSON-RPC endpoint, or a transport URL)."),
        click.option("--binding", default="", help="Use this binding (JSONRPC, HTTP+JSON, GRPC, websocket, unix, ...) "
                     "instead of the card's first executable interface."),
        click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds per request."),
        click.option("--verify-card-secret", "--signing-secret", "verify_card_secret", default="",
                     help="HMAC secret to verify the card's signature."),
        click.option("--verify-card-jwks-url", default="", help="JWKS URL to verify the card's signature."),
        click.option("--require-card-signature", "--require-signature", "require_card_signature", is_flag=True,
                     default=False, help="Refuse an unsigned card."),
        click.option("--output", "-o", type=click.Choice(OUTPUTS), default="text", show_default=True,
                     help="text for people, json for scripts (one object per result or event)."),
    ]):
        f = option(f)
    return _auth_options(f)


@contextlib.contextmanager
def _quiet(debug: bool) -> Iterator[None]:
    """Without ``--debug``: no library warnings or log chatter in the user's output (restored afterwards)."""
    if debug:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore", "a2a", "grpc")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short HMAC keys and the like: not the command's output
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def _command(f: Callable[[_Run], int | None]) -> Callable[..., None]:
    """Run the body with one event loop runner; map every failure to its exit code and one stderr line."""

    @wraps(f)
    @click.pass_context
    def run(ctx: click.Context, **_: Any) -> None:
        state: _State = ctx.find_object(_State)
        settings = Settings(ctx, state.config)
        view = _view(settings)
        code: int = ExitCode.OK
        with _quiet(state.debug), asyncio.Runner(loop_factory=_loop_factory()) as runner:
            try:
                code = f(_Run(settings, view, runner)) or ExitCode.OK
            except click.exceptions.Exit:
                raise
            except KeyboardInterrupt:
                view.error("Interrupted.", ExitCode.INTERRUPTED)
                code = ExitCode.INTERRUPTED
            except Exception as exc:
                error = classify(exc)
                if state.debug:
                    traceback.print_exc()
                view.error(error.message, error.code)
                code = error.code
            finally:
                view.close()
        ctx.exit(int(code))

    return run


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - not on Windows
        return None
    return uvloop.new_event_loop


class _State:
    def __init__(self, config: dict[str, Any], debug: bool) -> None:
        self.config = config
        self.debug = debug


class _Run:
    """What a subcommand body gets: its settings, its view and the event loop runner."""

    def __init__(self, settings: Settings, view: Any, runner: asyncio.Runner) -> None:
        self.settings = settings
        self.view = view
        self.runner = runner
        self.connector: Any = None  # set when the agent is opened
        self.url = ""  # the agent's URL, once it is known: an unreachable agent is named by it

    def context(self, unary: bool = True) -> Any:
        """A call context with the credentials (every binding carries them) and, for unary calls, the timeout."""
        from a2a.client import ClientCallContext

        headers = self.connector.auth.headers() if self.connector is not None else {}
        return ClientCallContext(service_parameters=headers,
                                 timeout=self.settings.number("timeout", 30.0) if unary else None)

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            return self.runner.run(coro)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            raise classify(exc, url=self.url) from None

    @property
    def json(self) -> bool:
        return bool(self.view.json)


def _view(settings: Settings) -> Any:
    from iac_code_a2a_client.view import JsonView, TextView

    output = settings.text("output", "text") or "text"
    if output not in OUTPUTS:
        raise click.UsageError("--output must be text, table or json.")
    return JsonView() if output == "json" else TextView()


# ----------------------------------------------------------------------------- the group


@click.group("a2a-client", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", default="", help="YAML file with client settings (a2a-client.yml).")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.pass_context
def client(ctx: click.Context, config_path: str, debug: bool) -> None:
    """Call remote A2A agents: send prompts, manage tasks and push configs, route by name or skill."""
    try:
        import a2a.client  # noqa: F401
        import rich  # noqa: F401
    except ImportError:
        click.echo(MISSING_DEPENDENCIES, err=True)
        ctx.exit(1)
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    config: dict[str, Any] = {}
    if ctx.invoked_subcommand != "route-preview":
        try:
            config = load_client_config(config_path)
        except ClientError as exc:
            click.echo(f"Error: {exc.message}", err=True)
            ctx.exit(int(exc.code))
    ctx.obj = _State(config, debug)


def _connector(r: _Run) -> Any:
    from iac_code.api import client_transports
    from iac_code_a2a_client.card_verify import CardVerifier
    from iac_code_a2a_client.connect import Auth, Connector

    s = r.settings
    auth = Auth(token=s.text("token"), basic_username=s.text("basic_username"),
                basic_password=s.text("basic_password"), api_key=s.text("api_key"),
                api_key_header=s.api_key_header())
    try:
        verifier = CardVerifier(secret=s.text("verify_card_secret"), jwks_url=s.text("verify_card_jwks_url"),
                                require_signature=bool(s.flag("require_card_signature")),
                                timeout=s.number("timeout", 30.0))
    except ValueError as exc:
        raise ClientError(str(exc)) from None
    options = {k: s.get(k) for k in ("stdio_command", "redis_password") if s.get(k)}
    return Connector(transports=client_transports(), auth=auth, timeout=s.number("timeout", 30.0), verifier=verifier,
                     binding=s.text("binding"), options=options)


async def _open(r: _Run, url: str, streaming: bool = True) -> Any:
    r.url = url
    r.view.url = url
    r.connector = _connector(r)
    return await r.connector.open(url, streaming=streaming)


def _unary(r: _Run, call: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    """Open the agent at ``--url``, run one call with it, close; the result as JSON."""
    url = r.settings.required("url")

    async def body() -> Any:
        agent = await _open(r, url)
        try:
            result = await call(agent)
            return None if result is None else ev.as_json(result)
        finally:
            await agent.aclose()

    return r.run(body())


# ----------------------------------------------------------------------------- call


@client.command("call")
@_connection_options
@click.option("--route", "route", multiple=True, help="Route spec name=url;skills=a,b;tags=x,y (repeatable).")
@click.option("--route-name", default="", help="Use the route of this name.")
@click.option("--skill", default="", help="Prefer routes offering this skill.")
@click.option("--router", default="", help="Router plugin (default: default).")
@click.option("--route-state-dir", default="", help="Read routes saved by route-preview --save-routes.")
@click.option("--prompt", "-p", default="", help="The prompt to send.")
@click.option("--cwd", default=".", help="Workspace directory on the agent (default: this directory).")
@click.option("--no-cwd", is_flag=True, default=False,
              help="Send no workspace: the agent works in its own directory.")
@click.option("--context-id", default="", help="Continue this context.")
@click.option("--task-id", default="", help="The task to continue (or, with --answer, the paused task).")
@click.option("--answer", type=click.Choice(["allow_once", "deny"]), default=None,
              help="Answer the permission question a paused task is waiting for (with --task-id).")
@click.option("--iac-code-model", default="", help="Model for this turn (metadata.iac_code.iac_code_model).")
@click.option("--iac-code-api-key", default="", help="Model API key for this turn (never printed).")
@click.option("--thinking-enabled/--no-thinking-enabled", default=None, help="Ask for model thinking.")
@click.option("--thinking-effort", default="", help="Thinking effort (low, medium, high).")
@click.option("--thinking-budget", type=int, default=None, help="Thinking token budget.")
@click.option("--language", default="", help="Preferred language of the agent's text (en, zh, ...).")
@click.option("--stream/--no-stream", default=False, help="Stream events as they happen.")
@click.option("--mode", "run_mode", type=click.Choice(["normal", "pipeline"]), default=None,
              help="Run mode of the turn (metadata.iac_code.run_mode); default: the agent's.")
@click.option("--pipeline", "pipeline_name", default="",
              help="Pipeline to run in pipeline mode (metadata.iac_code.pipeline_name: selling, "
                   "selling_solution_first).")
@click.option("--rich", is_flag=True, default=False,
              help="Ask for rich candidate options: diagrams and costs (candidatePresentation rich-v1).")
@_command
def call(r: _Run) -> int:
    """Send a prompt to a remote agent (or answer its permission question) and show the turn."""
    from iac_code_a2a_client.session import CallSession, message_request

    s = r.settings
    answer = s.text("answer") if s.given("answer") else ""
    prompt = s.text("prompt") if s.given("prompt") else ""
    if not answer and not prompt:
        raise ClientError("--prompt is required (or --answer with --task-id).", ExitCode.USAGE)
    if answer and not s.text("task_id"):
        raise ClientError("task-id is required with --answer. Provide --task-id or task-id in --config.",
                          ExitCode.USAGE)
    if s.given("no_cwd") and s.given("cwd"):
        raise ClientError("--cwd and --no-cwd exclude each other.", ExitCode.USAGE)
    url = s.text("url") or _route_url(s, prompt)
    stream = bool(s.flag("stream"))
    interactive = not r.json and sys.stdin.isatty() and sys.stdout.isatty()
    agent = r.run(_open(r, url, streaming=stream))
    metadata = _turn_metadata(s)
    session = CallSession(runner=r.runner, agent=agent, view=r.view, interactive=interactive,
                          headers=r.connector.auth.headers(), timeout=s.number("timeout", 30.0),
                          url=url, cwd=metadata.get("cwd"),
                          ask=_ask_permission(r.view) if interactive else None,
                          confirm=_confirm(r.view) if interactive else None,
                          ask_pipeline=_ask_pipeline(r.view) if interactive else None,
                          metadata=metadata, follow_up_flags=_pipeline_flags(s))
    try:
        if answer:
            return session.answer(s.text("task_id"), s.text("context_id"), answer)
        return session.run(message_request(prompt, metadata=metadata, context_id=s.text("context_id"),
                                           task_id=s.text("task_id")))
    finally:
        r.runner.run(agent.aclose())


def _turn_metadata(s: Settings) -> dict[str, Any]:
    """``metadata.iac_code`` of the turn: the workspace (none with ``--no-cwd``), model, key, language, thinking."""
    no_cwd = bool(s.flag("no_cwd")) and not (s.given("cwd") and not s.given("no_cwd"))  # the command line wins
    metadata: dict[str, Any] = {} if no_cwd else {"cwd": _cwd(s.text("cwd", "."))}
    for key in ("iac_code_model", "iac_code_api_key"):
        if s.text(key):
            metadata[key] = s.text(key)
    if s.text("language"):
        metadata["preferredLanguage"] = s.text("language")
    thinking: dict[str, Any] = {}
    enabled = s.flag("thinking_enabled")
    if enabled is not None:
        thinking["enabled"] = enabled
    if s.text("thinking_effort"):
        thinking["effort"] = s.text("thinking_effort")
    budget = s.integer("thinking_budget")
    if budget is not None and budget > 0:
        thinking["budget"] = budget
    if thinking:
        metadata["thinking"] = thinking
    if s.text("run_mode"):
        metadata["run_mode"] = s.text("run_mode")
    if s.text("pipeline_name"):
        metadata["pipeline_name"] = s.text("pipeline_name")
    if s.flag("rich"):
        metadata["candidatePresentation"] = "rich-v1"
    return metadata


def _pipeline_flags(s: Settings) -> list[str]:
    """The pipeline options of this call, repeated in the command line that answers its question later."""
    flags: list[str] = []
    if s.text("run_mode"):
        flags += ["--mode", shlex.quote(s.text("run_mode"))]
    if s.text("pipeline_name"):
        flags += ["--pipeline", shlex.quote(s.text("pipeline_name"))]
    if s.flag("rich"):
        flags.append("--rich")
    return flags


def _cwd(value: str) -> str:
    """``.`` or empty: the logical current directory ($PWD when it is this directory), else the value normalised."""
    if value in ("", "."):
        physical = os.getcwd()
        logical = os.environ.get("PWD", "")
        if logical and os.path.isabs(logical):
            try:
                if os.path.samefile(logical, physical):
                    return os.path.normpath(logical)
            except OSError:
                pass
        return physical
    return os.path.normpath(value)


def _route_url(s: Settings, prompt: str) -> str:
    from iac_code.api import RouteQuery
    from iac_code_a2a_client.routing import RouteError, load_snapshot, parse_route, routes_from_config, select

    try:
        if s.given("route"):
            routes = [parse_route(spec) for spec in s.get("route")]
        else:
            routes = routes_from_config(s.get("routes"))
        if not routes and s.text("route_state_dir"):
            routes = load_snapshot(s.text("route_state_dir"))
    except RouteError as exc:
        raise ClientError(str(exc), ExitCode.ROUTE) from None
    if not routes and not s.text("route_name"):
        raise ClientError("url is required. Provide --url or url in --config, or configure --route/--route-name.",
                          ExitCode.USAGE)
    router = _router(s.text("router"))
    try:
        route, _ = select(router, routes, RouteQuery(name=s.text("route_name"), skill=s.text("skill"), prompt=prompt))
    except (RouteError, ValueError) as exc:
        raise ClientError(str(exc), ExitCode.ROUTE) from None
    return route.url


def _router(name: str) -> Any:
    from iac_code.api import routers

    installed = routers()
    chosen = installed.get((name or "default").strip().lower())
    if chosen is None:
        raise ClientError(f"Unknown router '{name}'. Installed: {', '.join(sorted(installed)) or 'none'}.",
                          ExitCode.ROUTE)
    return chosen


def _ask_permission(view: Any) -> Callable[[dict[str, Any]], str]:
    def ask(envelope: dict[str, Any]) -> str:
        labels = {o.get("id"): o.get("label") for o in envelope.get("options", []) if isinstance(o, dict)}
        allow, deny = labels.get("allow_once") or "Allow once", labels.get("deny") or "Deny"
        while True:  # the envelope's title is on screen already; its localised option labels are the question
            reply = ask_line(view.console, f"[a] {allow} / [d] {deny}: ").strip().lower()
            if reply in ("a", "allow", "allow_once", "allow once", "y", "yes", "1"):
                return "allow_once"
            if reply in ("d", "deny", "n", "no", "2"):
                return "deny"

    return ask


def _ask_pipeline(view: Any) -> Callable[[dict[str, Any]], str]:
    """The pipeline's question (already on screen with its numbered options) → the answer typed, as sent."""

    def ask(question: dict[str, Any]) -> str:
        hint = "number or text" if question.get("kind") != "deployment_confirmation" else \
            "number, confirm, adjust key=value, reselect or cancel"
        while True:
            reply = ask_line(view.console, f"Your answer ({hint}): ").strip()
            if reply:
                return reply

    return ask


def _confirm(view: Any) -> Callable[[str], bool]:
    def confirm(question: str) -> bool:
        reply = ask_line(view.console, f"{question} [Y/n]: ").strip().lower()
        return reply in ("", "y", "yes")

    return confirm


# ----------------------------------------------------------------------------- discovery and tasks


@client.command("discover")
@_connection_options
@_command
def discover(r: _Run) -> int:
    """Fetch (and verify) an agent's card; show its interfaces and skills."""
    url = r.settings.required("url")

    async def body() -> tuple[dict[str, Any], Any]:
        connector = _connector(r)
        data, _card, result = await connector.discover(url)
        return data, result

    data, result = r.run(body())
    if r.json:
        r.view.result(data)
        return ExitCode.OK
    _show_card(r.view, data, result)
    return ExitCode.OK


def _show_card(view: Any, card: dict[str, Any], result: Any) -> None:
    view.console.print(f"{card.get('name', '')} {card.get('version', '')}".strip(), markup=False)
    if card.get("description"):
        view.console.print(str(card["description"]), markup=False)
    if result is not None:
        view.console.print(f"Signature: {result.reason}" + (f" (kid {result.kid})" if result.kid else ""),
                           markup=False)
    capabilities = card.get("capabilities", {}) or {}
    flags = [k for k in ("streaming", "pushNotifications", "extendedAgentCard") if capabilities.get(k)]
    view.console.print(f"Capabilities: {', '.join(flags) or 'none'}", markup=False)
    view.console.print()
    _rows(view, ["Binding", "URL", "Version"],
          [[str(i.get("protocolBinding", "")), str(i.get("url", "")), str(i.get("protocolVersion", ""))]
           for i in card.get("supportedInterfaces", []) or []])
    view.console.print()
    _rows(view, ["Skill", "Name", "Tags"],
          [[str(k.get("id", "")), str(k.get("name", "")), ", ".join(k.get("tags", []) or [])]
           for k in card.get("skills", []) or []])


@client.command("task-get")
@_connection_options
@click.option("--task-id", default="", help="The task.")
@click.option("--history-length", type=int, default=None, help="At most this many history messages.")
@_command
def task_get(r: _Run) -> int:
    """Show one task."""
    from a2a.types.a2a_pb2 import GetTaskRequest

    request = GetTaskRequest(id=r.settings.required("task_id"))
    length = r.settings.integer("history_length")
    if length is not None:
        request.history_length = length
    r.view.result(_unary(r, lambda agent: agent.client.get_task(request, context=r.context())))
    return ExitCode.OK


@client.command("task-cancel")
@_connection_options
@click.option("--task-id", default="", help="The task.")
@_command
def task_cancel(r: _Run) -> int:
    """Cancel a task."""
    from a2a.types.a2a_pb2 import CancelTaskRequest

    request = CancelTaskRequest(id=r.settings.required("task_id"))
    r.view.result(_unary(r, lambda agent: agent.client.cancel_task(request, context=r.context())))
    return ExitCode.OK


@client.command("task-list")
@_connection_options
@click.option("--context-id", default="", help="Only tasks of this context.")
@click.option("--status", default="", help="Only tasks in this state (working, input-required, TASK_STATE_...).")
@click.option("--page-size", type=int, default=None, help="Tasks per page.")
@click.option("--page-token", default="", help="Continue from this page token.")
@click.option("--include-artifacts", is_flag=True, default=False, help="Include artifacts.")
@click.option("--all", "all_pages", is_flag=True, default=False, help="Follow next-page tokens to the end.")
@_command
def task_list(r: _Run) -> int:
    """List tasks (a table, or JSON); --all follows the cursors."""
    from a2a.types.a2a_pb2 import ListTasksRequest

    s = r.settings
    request = ListTasksRequest()
    if s.text("context_id"):
        request.context_id = s.text("context_id")
    if s.text("status"):
        request.status = _task_state(s.text("status"))
    _page(s, request)
    if s.flag("include_artifacts"):
        request.include_artifacts = True
    follow = bool(s.get("all_pages") if s.given("all_pages") else s.flag("all"))
    url = s.required("url")

    async def body() -> list[dict[str, Any]]:
        agent = await _open(r, url)
        pages: list[dict[str, Any]] = []
        try:
            while True:
                page = ev.as_json(await agent.client.list_tasks(request, context=r.context()))
                pages.append(page)
                token = page.get("nextPageToken", "")
                if not follow or not token or len(pages) >= 10_000:
                    return pages
                request.page_token = token
        finally:
            await agent.aclose()

    pages = r.run(body())
    if follow:
        tasks = [t for p in pages for t in p.get("tasks", [])]
        result = {"tasks": tasks, "totalSize": pages[-1].get("totalSize", len(tasks)), "pageSize": len(tasks)}
    else:
        result = pages[-1]
    if r.json:
        r.view.result(result)
        return ExitCode.OK
    _task_table(r.view, result, url, s)
    return ExitCode.OK


def _rows(view: Any, headers: list[str], rows: list[list[str]]) -> None:
    """A table: rich on a terminal; plain columns (two spaces apart, a dashed rule) for pipes and files."""
    if view.console.is_terminal:
        from rich.table import Table

        table = Table(box=None, pad_edge=False, header_style="bold")
        for header in headers:
            table.add_column(header, no_wrap=True)
        for row in rows:
            table.add_row(*row)
        view.table(table)
        return
    widths = [max(len(r[c]) for r in [headers, *rows]) for c in range(len(headers))]
    for row in [headers, ["-" * w for w in widths], *rows]:
        line = "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        view.console.print(line, markup=False, highlight=False, soft_wrap=True)


def _page(s: Settings, request: Any) -> None:
    """``--page-size`` and ``--page-token`` onto a list request (absent values stay unset)."""
    size = s.integer("page_size")
    if size is not None:
        request.page_size = size
    if s.text("page_token"):
        request.page_token = s.text("page_token")


def _task_state(text: str) -> int:
    from a2a.types.a2a_pb2 import TaskState

    name = text.strip().upper().replace("-", "_")
    if not name.startswith("TASK_STATE_"):
        name = "TASK_STATE_" + name
    try:
        return TaskState.Value(name)
    except ValueError:
        known = ", ".join(ev.friendly_state(n) for n in TaskState.keys() if n != "TASK_STATE_UNSPECIFIED")
        raise ClientError(f"Unknown task state '{text}'. Known: {known}.", ExitCode.USAGE) from None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _task_table(view: Any, result: dict[str, Any], url: str, s: Settings) -> None:

    tasks = result.get("tasks", []) or []
    if not tasks:
        view.console.print("No A2A tasks found.")
        return
    rows = []
    for task in tasks:
        status = task.get("status", {})
        message = status.get("message", {}) if isinstance(status.get("message"), dict) else {}
        text = " ".join(p.get("text", "") for p in message.get("parts", []) if isinstance(p, dict) and p.get("text"))
        rows.append([_clip(str(task.get("id", "")), 28), ev.friendly_state(status.get("state", "")),
                     _clip(str(task.get("contextId", "")), 22), _clip(str(status.get("timestamp", "")), 20),
                     _clip(" ".join(text.split()), 56)])
    _rows(view, ["ID", "Status", "Context", "Updated", "Message"], rows)
    total = result.get("totalSize")
    view.console.print(f"Showing {len(tasks)} of {total} tasks." if isinstance(total, int) and total
                       else f"Showing {len(tasks)} tasks.")
    token = result.get("nextPageToken")
    if token:
        parts = ["iac-code a2a-client task-list --url", shlex.quote(url)]
        for key, flag in (("context_id", "--context-id"), ("status", "--status")):
            if s.text(key):
                parts += [flag, shlex.quote(s.text(key))]
        if s.integer("page_size") is not None:
            parts += ["--page-size", str(s.integer("page_size"))]
        if s.flag("include_artifacts"):
            parts.append("--include-artifacts")
        parts += ["--page-token", shlex.quote(str(token))]
        view.console.print("Next page: " + " ".join(parts), markup=False, soft_wrap=True)


@client.command("task-subscribe")
@_connection_options
@click.option("--task-id", default="", help="The task.")
@_command
def task_subscribe(r: _Run) -> int:
    """Follow an active task's events until it stops (completed, failed, input-required, ...)."""
    from a2a.types.a2a_pb2 import SubscribeToTaskRequest

    request = SubscribeToTaskRequest(id=r.settings.required("task_id"))
    url = r.settings.required("url")
    final = {"state": ""}

    async def body() -> None:
        agent = await _open(r, url)
        try:
            stream = agent.client.subscribe(request, context=r.context(unary=False))
            try:
                async for response in stream:
                    event = ev.as_json(response)
                    r.view.event(event)
                    final["state"] = ev.state(event) or final["state"]
                    # The first event is the task as it is now (a paused task is input-required): only an
                    # update can end the subscription.
                    if "statusUpdate" in event and final["state"] in ev.STOP_STATES:
                        return
                    if "task" in event and ev.suspended_permission(event["task"]):
                        return  # no live turn: nothing happens on the task until its question is answered
            finally:
                await stream.aclose()
        finally:
            await agent.aclose()

    r.run(body())
    r.view.finish({"state": final["state"], "taskId": request.id})
    return ExitCode.TASK_FAILED if final["state"] in ("failed", "rejected", "canceled") else ExitCode.OK


# ----------------------------------------------------------------------------- push configs and the extended card


def _push_config_target(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--config-id", default="", help="The push config id.")(f)
    return click.option("--task-id", default="", help="The task.")(f)


@client.command("push-config-create")
@_connection_options
@_push_config_target
@click.option("--callback-url", default="", help="Where the agent POSTs notifications.")
@click.option("--notification-token", default="", help="Token the agent sends back with each notification.")
@click.option("--auth-scheme", default="", help="Authentication scheme of the callback (e.g. Bearer).")
@click.option("--auth-credentials", default="", help="Credentials for that scheme.")
@_command
def push_config_create(r: _Run) -> int:
    """Register a push notification config on a task."""
    from a2a.types.a2a_pb2 import TaskPushNotificationConfig

    s = r.settings
    config = TaskPushNotificationConfig(task_id=s.required("task_id"), id=s.required("config_id"),
                                        url=s.required("callback_url"))
    if s.text("notification_token"):
        config.token = s.text("notification_token")
    if s.text("auth_scheme") or s.text("auth_credentials"):
        config.authentication.scheme = s.text("auth_scheme")
        config.authentication.credentials = s.text("auth_credentials")
    r.view.result(_unary(r, lambda agent: agent.client.create_task_push_notification_config(
        config, context=r.context())))
    return ExitCode.OK


@client.command("push-config-get")
@_connection_options
@_push_config_target
@_command
def push_config_get(r: _Run) -> int:
    """Show one push notification config."""
    from a2a.types.a2a_pb2 import GetTaskPushNotificationConfigRequest

    request = GetTaskPushNotificationConfigRequest(task_id=r.settings.required("task_id"),
                                                   id=r.settings.required("config_id"))
    r.view.result(_unary(r, lambda agent: agent.client.get_task_push_notification_config(
        request, context=r.context())))
    return ExitCode.OK


@client.command("push-config-list")
@_connection_options
@click.option("--task-id", default="", help="The task.")
@click.option("--page-size", type=int, default=None, help="Configs per page.")
@click.option("--page-token", default="", help="Continue from this page token.")
@_command
def push_config_list(r: _Run) -> int:
    """List a task's push notification configs."""
    from a2a.types.a2a_pb2 import ListTaskPushNotificationConfigsRequest

    s = r.settings
    request = ListTaskPushNotificationConfigsRequest(task_id=s.required("task_id"))
    _page(s, request)
    r.view.result(_unary(r, lambda agent: agent.client.list_task_push_notification_configs(
        request, context=r.context())))
    return ExitCode.OK


@client.command("push-config-delete")
@_connection_options
@_push_config_target
@_command
def push_config_delete(r: _Run) -> int:
    """Delete a push notification config."""
    from a2a.types.a2a_pb2 import DeleteTaskPushNotificationConfigRequest

    request = DeleteTaskPushNotificationConfigRequest(task_id=r.settings.required("task_id"),
                                                      id=r.settings.required("config_id"))
    _unary(r, lambda agent: agent.client.delete_task_push_notification_config(request, context=r.context()))
    r.view.result({"deleted": True, "taskId": request.task_id, "id": request.id})
    return ExitCode.OK


@client.command("extended-card")
@_connection_options
@_command
def extended_card(r: _Run) -> int:
    """Fetch the authenticated extended Agent Card."""
    from a2a.types.a2a_pb2 import GetExtendedAgentCardRequest

    r.view.result(_unary(r, lambda agent: agent.client.get_extended_agent_card(
        GetExtendedAgentCardRequest(), context=r.context())))
    return ExitCode.OK


# ----------------------------------------------------------------------------- routing


@client.command("route-preview")
@click.option("--route", "route", multiple=True, help="Route spec name=url;skills=a,b;tags=x,y (repeatable).")
@click.option("--name", default="", help="Explicit route name.")
@click.option("--skill", default="", help="Skill to route by.")
@click.option("--prompt", default="", help="Prompt to route by.")
@click.option("--router", default="", help="Router plugin (default: default).")
@click.option("--route-state-dir", "--persistence-dir", "route_state_dir", default="",
              help="Directory for the routes.json snapshot.")
@click.option("--save-routes", is_flag=True, default=False, help="Write the routes to <route-state-dir>/routes.json.")
@click.option("--output", "-o", type=click.Choice(OUTPUTS), default="text", show_default=True)
@_command
def route_preview(r: _Run) -> int:
    """Show which route a call would use: every candidate, its score and why, and the winner."""
    from iac_code.api import RouteQuery
    from iac_code_a2a_client.routing import RouteError, parse_route, route_dict, save_snapshot, select

    s = r.settings
    specs = s.get("route") or ()
    if not specs:
        raise ClientError("At least one --route is required.", ExitCode.USAGE)
    try:
        routes = [parse_route(spec) for spec in specs]
    except RouteError as exc:
        raise ClientError(str(exc), ExitCode.ROUTE) from None
    state_dir = s.text("route_state_dir")
    if s.flag("save_routes") and not state_dir:
        raise ClientError("--route-state-dir is required with --save-routes.", ExitCode.USAGE)
    if state_dir:
        save_snapshot(state_dir, routes)
    router = _router(s.text("router"))
    try:
        winner, candidates = select(router, routes, RouteQuery(name=s.text("name"), skill=s.text("skill"),
                                                               prompt=s.text("prompt")))
    except (RouteError, ValueError) as exc:
        raise ClientError(str(exc), ExitCode.ROUTE) from None
    if r.json:
        r.view.result({"route": route_dict(winner), "candidates": [
            {"route": route_dict(c.route), "score": c.score, "reasons": list(c.reasons)} for c in candidates]})
        return ExitCode.OK
    _rows(r.view, ["", "Route", "Score", "Why", "URL"],
          [["→" if c.route is winner else "", c.route.name, str(c.score), "; ".join(c.reasons), c.route.url]
           for c in candidates])
    r.view.console.print(f"Winner: {winner.name} ({winner.url})", markup=False)
    return ExitCode.OK


# ----------------------------------------------------------------------------- execution control


@client.group("execution")
def execution() -> None:
    """Pause, resume, terminate or read a context's execution (agents whose card advertises execution control)."""


def _execution_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.argument("agent_url", metavar="[AGENT_URL]", required=False, default=""),
        click.option("--context-id", default="", help="The context whose execution it is (required)."),
        click.option("--task-id", default="", help="The task (pause: default the execution's current task)."),
        click.option("--execution-id", default="", help="The execution expected (default: the current one)."),
        click.option("--pause-id", default="", help="The pause (resume: default the active one)."),
        click.option("--request-id", default="", help="Idempotency key (default: a fresh one per call)."),
        click.option("--connection-epoch", type=int, default=None,
                     help="connectionEpoch sent (default: the highest the agent has seen, or 0)."),
    ]):
        f = option(f)
    return _connection_options(f)


def _wait_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--wait", "wait", is_flag=True, default=False,
                        help="Read the state again until the phase settles (bounded by --timeout).")(f)


def _execution(r: _Run, operation: str, *, reason: str = "", reconnect_timeout: float | None = None) -> int:
    from iac_code_a2a_client.execution import Identity, open_target, run_operation

    s = r.settings
    url = s.text("agent_url") or s.required("url")
    identity = Identity(context_id=s.required("context_id"), task_id=s.text("task_id"),
                        execution_id=s.text("execution_id"), pause_id=s.text("pause_id"),
                        request_id=s.text("request_id"), connection_epoch=s.integer("connection_epoch"))
    wait = s.number("timeout", 30.0) if operation != "state" and s.flag("wait") else None

    async def body() -> dict[str, Any]:
        r.url = r.view.url = url
        r.connector = _connector(r)
        target = await open_target(r.connector, url)
        try:
            return await run_operation(target, operation, identity, reason=reason,
                                       reconnect_timeout=reconnect_timeout, wait=wait)
        finally:
            await target.aclose()

    snapshot = r.run(body())
    if r.json:
        r.view.result(snapshot)
    else:
        r.view.execution_snapshot(snapshot)
    return ExitCode.OK


@execution.command("state")
@_execution_options
@_command
def execution_state(r: _Run) -> int:
    """Show the execution of a context: its phase, task, pause and what a pause waits for."""
    return _execution(r, "state")


@execution.command("pause")
@_execution_options
@_wait_option
@click.option("--reason", default="client_request", show_default=True, help="Why the execution is paused.")
@click.option("--reconnect-timeout", type=float, default=None,
              help="Seconds (1-3600) before an unresumed pause terminates the execution (agent default 300).")
@_command
def execution_pause(r: _Run) -> int:
    """Pause the running execution at its next safe point (202 pausing until everything is parked)."""
    timeout = r.settings.get("reconnect_timeout")
    return _execution(r, "pause", reason=r.settings.text("reason") or "client_request",
                      reconnect_timeout=None if timeout is None else float(timeout))


@execution.command("resume")
@_execution_options
@_wait_option
@_command
def execution_resume(r: _Run) -> int:
    """Resume a paused execution: the held turn goes on where it stopped."""
    return _execution(r, "resume")


@execution.command("terminate")
@_execution_options
@_wait_option
@click.option("--reason", default="explicit_terminate", show_default=True, help="Why the execution ends.")
@_command
def execution_terminate(r: _Run) -> int:
    """Terminate the execution: its running task is canceled, the context takes new turns again."""
    return _execution(r, "terminate", reason=r.settings.text("reason") or "explicit_terminate")
