"""The ``iac-code`` command line: ``iac-code a2a`` runs the A2A server."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from iac_code import __version__
from iac_code.base.errors import StartupError

if TYPE_CHECKING:
    from iac_code.server.plugins import Plugins
    from iac_code.base.records import PushContext

logger = logging.getLogger("iac_code")
# The loggers whose INFO lines an operator sees (the rest log warnings and errors only).
LOGGERS = ("iac_code", "iac_code_transport_http", "iac_code_transport_stdio", "iac_code_push")


def setup_logging(debug: bool, to_stdout: bool, log_format: str = "text") -> None:
    """Log to stderr (and mirror to stdout when asked); debug raises the level; ``log-format`` picks text or JSON."""
    from iac_code.server.logs import formatter

    level = logging.DEBUG if debug else logging.INFO
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if to_stdout:
        handlers.append(logging.StreamHandler(sys.stdout))
    fmt = formatter(log_format)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)  # library warnings are log lines too (one format, JSON included)
    for name in LOGGERS:
        logging.getLogger(name).setLevel(level)
    if debug:
        logging.getLogger("a2a").setLevel(logging.DEBUG)


# A process that could not start (configuration, installation, state directory, address in use)
# exits with this code, after one "Error: ..." line per problem.
STARTUP_EXIT_CODE = 2


def _fail(message: str) -> None:
    for line in message.splitlines() or [message]:
        click.echo(f"Error: {line}", err=True)
    sys.exit(STARTUP_EXIT_CODE)


class PluginCommands(click.Group):
    """A command group that also offers the commands plugins add (hook ``iac_code_cli_commands``).

    Plugin commands are listed from their records and imported only when one runs, so a
    server start never pays for a client's imports.
    """

    parent = ""

    def _plugin_commands(self) -> dict[str, Any]:
        try:
            from iac_code.server.plugins import Plugins

            return {name: p.record for name, p in Plugins.load().cli_commands(self.parent).items()}
        except StartupError as exc:  # two plugins claiming one command: say so, keep the kernel's commands
            click.echo(f"Error: {exc}", err=True)
            return {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            record = self._plugin_commands().get(cmd_name)
            if record is not None:
                # a2a-sdk reads its tracing switch when first imported: a client traces only when asked to.
                os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
                self.add_command(record.load(), cmd_name)
            elif not ctx.resilient_parsing:
                from iac_code.server.plugins import KNOWN_COMMANDS, Plugins, missing_command

                command = " ".join(filter(None, (self.parent, cmd_name)))
                if command in KNOWN_COMMANDS:  # a first-party command whose plugin is missing: say what to install
                    click.echo(f"Error: {missing_command(command, Plugins.load())}", err=True)
                    ctx.exit(STARTUP_EXIT_CODE)
        return super().get_command(ctx, cmd_name)


class _ServerCommands(PluginCommands):
    """``iac-code a2a``: the server, its kernel sub-commands and the ones plugins add."""

    parent = "a2a"


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version and the distribution it runs from, with its summary and location
    (the package index also has an unrelated ``iac-code``, so the name alone proves nothing)."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("iac-code")
        where = f"distribution {dist.metadata['Name']} {dist.version}: {dist.metadata['Summary']}; " \
                f"installed in {dist.locate_file('')}"
    except PackageNotFoundError:
        where = "not installed: running from a source tree"
    click.echo(f"iac-code, version {__version__} ({where})")
    ctx.exit()


@click.group(cls=PluginCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and the distribution it runs from, then exit.")
def main() -> None:
    """iac-code: Infrastructure-as-Code assistant for Alibaba Cloud."""


@main.group("a2a", cls=_ServerCommands, invoke_without_command=True)
@click.pass_context
@click.option("--config", "config_path", default="", help="YAML file with server options.")
@click.option("--host", default=None, help="Bind host (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Bind port (default 41242; 0 picks a free port).")
@click.option("--transport", "transports", multiple=True,
              help="Transport plugin (default http); repeat to serve several from one process.")
@click.option("--debug", "-d", is_flag=True, help="Debug logging.")
@click.option("--log-to-stdout/--no-log-to-stdout", default=None, help="Mirror logs to stdout.")
@click.option("--thinking-exposure", "thinking_exposure", multiple=True,
              help="Expose tool-trace (default) and/or raw-thinking metadata; repeatable.")
@click.option("--plugins", "plugins_action", type=click.Choice(["list"]), default=None,
              help="'list' shows every plugin and exits.")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", help="Format for --plugins list.")
@click.option("--check-config", "check_config", is_flag=True,
              help="Run the start-up validation (every plugin's settings, dependent options, required extras), "
              "print the effective settings with secrets masked, and exit (2, one line per problem, if invalid).")
def a2a(ctx: click.Context, config_path: str, host: str | None, port: int | None, transports: tuple[str, ...],
        debug: bool, log_to_stdout: bool | None, thinking_exposure: tuple[str, ...], plugins_action: str | None,
        output: str, check_config: bool) -> None:
    """Run iac-code as an A2A 1.0 server."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        raw, plugins = _load_plugins(config_path)
        if plugins_action == "list":
            _print_plugins(plugins, output)
            return
        overrides: dict[str, Any] = {"host": host, "port": port, "transport": list(transports) or None,
                                     "log_to_stdout": log_to_stdout}
        if debug:
            overrides["debug"] = True
        if thinking_exposure:
            overrides["thinking_exposure"] = list(thinking_exposure)
        config = _load_settings(config_path, raw, plugins, overrides, report_broken=False)
        from iac_code.server.validation import ensure_valid

        ensure_valid(config, plugins)  # every problem, before the state directory or a socket is touched
        _report_broken(plugins)  # a start that needed one has failed above, naming it: one line per problem
        if check_config:
            from iac_code.base.config import masked_settings

            click.echo(json.dumps(masked_settings(config), indent=2, sort_keys=True, default=str))
            return
        _serve(config, plugins)
    except StartupError as exc:
        _fail(str(exc))


def _serve(config: Any, plugins: Any) -> None:
    """Lock the state directory, then build and run the kernel (it binds, then restores state)."""
    from iac_code.server.kernel import Kernel
    from iac_code.server.state_lock import StateDirectoryLock

    lock = StateDirectoryLock(config.resolved_persistence_dir())
    lock.acquire()  # before anything under the directory is read or written
    try:
        kernel = Kernel(config, plugins, state_lock=lock)
        _run(kernel.serve_forever)
    except BaseException:
        lock.abandon()  # a start that failed leaves no lock file it created behind
        raise


def _load_plugins(config_path: str) -> tuple[dict[str, Any], Any]:
    from iac_code.base.config import read_config_file

    raw = read_config_file(config_path)
    # a2a-sdk reads its tracing switch at import time, before plugins load.
    if not raw.get("tracing"):
        os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    from iac_code.server.plugins import Plugins

    blocked = raw.get("disabled_plugins") or []
    return raw, Plugins.load(blocked=blocked if isinstance(blocked, list) else [])


def _load_settings(config_path: str, raw: dict[str, Any], plugins: Any, overrides: dict[str, Any], *,
                   report_broken: bool = True) -> Any:
    from iac_code.base.config import build_config_model, load_config

    model = build_config_model([(p.plugin, p.record) for p in plugins.config_models()])
    # The path is recorded so the server never reads its own config file (it holds the secrets) as input.
    config = load_config(config_path or None, raw=raw, overrides=overrides, model=model)
    setup_logging(config.debug, config.log_to_stdout, config.log_format)
    if report_broken:
        _report_broken(plugins)
    return config


@dataclass(frozen=True)
class CommandContext:
    """What a plugin's ``iac-code a2a`` sub-command works with: the server's settings (every plugin's keys,
    logging set up as the server's) and the components it may build apart from the server."""

    config: Any
    plugins: Plugins

    @property
    def state_dir(self) -> Path:
        """The server's persistence directory (the sub-command does not lock it: the server may be running)."""
        return Path(self.config.resolved_persistence_dir())

    def instrumentation(self) -> Any:
        """The installed instrumentation plugins' observer for this configuration (``None`` without one):
        a command starts it (``await start(None)``) to trace and measure what it does apart from the server."""
        return self.plugins.instrumentation(self.config)

    def push_context(self, *, shared: bool = False) -> PushContext:
        """The push context of a command run apart from the server: the push queues and, with ``shared``,
        the push-config records of the configured ``task-store`` backend (``None`` for ``local``)."""
        from iac_code.base.records import PushContext

        return PushContext(config=self.config, state_dir=self.state_dir, queues=self.plugins.push_queue_factories(),
                           shared_configs=self._shared_push_configs() if shared else None)

    def _shared_push_configs(self) -> Any:
        name = self.config.task_store.strip().lower().replace("_", "-")
        if name == "local":
            return None
        backend = self.plugins.state_backends().get(name)
        if backend is None or backend.record.push_configs is None:
            from iac_code.server.plugins import install_hint

            raise StartupError(f"Task store {name!r} is not installed or has no push configurations. "
                               f"Install with: {install_hint(name)}")
        return backend.record.push_configs(self.config)


def command_context(config_path: str = "", overrides: dict[str, Any] | None = None) -> CommandContext:
    """Load the server's configuration for a plugin's sub-command (``--config``); ``StartupError`` when invalid."""
    raw, plugins = _load_plugins(config_path)
    return CommandContext(_load_settings(config_path, raw, plugins, overrides or {}), plugins)


def run_until_stopped(body: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``body(stop)`` on the server's event loop; SIGINT/SIGTERM set ``stop`` (a sub-command's main loop)."""
    _run(body)


def fail(message: str) -> NoReturn:
    """End a command that could not run: one ``Error: ...`` line per line of ``message``, exit code 2."""
    _fail(message)
    raise AssertionError("unreachable")


def _report_broken(plugins: Any) -> None:
    """A warning per installed plugin that failed to load (the configuration does not need it)."""
    for info in plugins.infos():
        if info.status == "failed":
            logger.warning("Plugin %s (%s %s) failed to load and is not used: %s", info.name, info.distribution,
                           info.version, info.reason)


@a2a.group("keys")
def keys() -> None:
    """The Agent Card signing keys of an asymmetric signer (card-signer: jwks)."""


def _key_set(config_path: str) -> Any:
    raw, plugins = _load_plugins(config_path)
    config = _load_settings(config_path, raw, plugins, {})
    name = config.effective_card_signer
    spec = plugins.card_signers().get(name) if name else None
    if spec is None or spec.record.create_key_set is None:
        hint = "" if "jwks" in plugins.card_signers() else " (pip install 'iac-code[a2a-signing]')"
        raise StartupError(f"No signing keys to manage: set 'card-signer: jwks' in the configuration{hint}.")
    return spec.record.create_key_set(config, config.resolved_persistence_dir())


@keys.command("rotate")
@click.option("--config", "config_path", default="", help="The server's YAML file.")
def keys_rotate(config_path: str) -> None:
    """Make a new signing key active; the old one stays published for its grace period."""
    try:
        kid = _key_set(config_path).rotate()
    except (StartupError, ValueError) as exc:
        _fail(str(exc))
        return
    click.echo(f"Active signing key: {kid}")


@keys.command("list")
@click.option("--config", "config_path", default="", help="The server's YAML file.")
@click.option("--output", type=click.Choice(["table", "json"]), default="table")
def keys_list(config_path: str, output: str) -> None:
    """Every signing key: kid, algorithm, status (active, retired, expired) and times."""
    try:
        described = _key_set(config_path).describe()
    except (StartupError, ValueError) as exc:
        _fail(str(exc))
        return
    if output == "json":
        click.echo(json.dumps({"keys": described}, indent=2))
        return
    for key in described:
        click.echo("  ".join(str(key.get(field, "")) for field in ("kid", "alg", "status", "createdAt", "retiredAt")))


def _run(body: Any) -> None:
    """Run ``body(stop)`` on uvloop; SIGINT/SIGTERM set ``stop``."""
    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
                pass
        await body(stop)

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is absent on Windows
        asyncio.run(serve())
    else:
        uvloop.run(serve())


def _print_plugins(plugins: Any, output: str) -> None:
    infos = [i.as_dict() for i in plugins.infos()]
    if output == "json":
        click.echo(json.dumps({"plugins": infos}, indent=2))
        return
    headers = ["name", "distribution", "version", "kind", "status", "hooks"]
    rows = [[i["name"], i["distribution"], i["version"], i["kind"],
             i["status"] + (f": {i['reason']}" if i["reason"] else ""), ", ".join(i["hooks"])] for i in infos]
    widths = [max(len(str(r[c])) for r in [headers, *rows]) for c in range(len(headers))]
    for row in [headers, *rows]:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":  # pragma: no cover
    main()
