"""The client's settings: command-line options over ``--config a2a-client.yml`` over environment.

Precedence per setting: an option given on the command line wins; otherwise the config
file's value when its key is present (dash or underscore spelling, ``~`` and ``${VAR}``
expanded by the same loader as the server's); otherwise, for the credentials, the server's
own environment variables (``IACCODE_A2A_HTTP_TOKEN``, ...); otherwise the default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click
from click.core import ParameterSource

from iac_code.api import AUTH_ENV, DEFAULT_API_KEY_HEADER, StartupError, read_config_file
from iac_code_a2a_client.errors import ClientError

# Every key a client config may hold (one flat namespace shared by the subcommands).
CONFIG_KEYS = frozenset({
    "url", "routes", "route", "route_name", "router", "route_state_dir", "cwd", "no_cwd", "context_id", "iac_code_model",
    "iac_code_api_key", "thinking_enabled", "thinking_effort", "thinking_budget", "timeout", "stream", "token",
    "basic_username", "basic_password", "api_key", "api_key_header", "verify_card_secret", "verify_card_jwks_url",
    "require_card_signature", "task_id", "history_length", "status", "page_size", "page_token",
    "include_artifacts", "output", "config_id", "callback_url", "notification_token", "auth_scheme",
    "auth_credentials", "binding", "language", "stdio_command", "redis_password", "all",
    "run_mode", "pipeline_name", "rich",
})


def load_client_config(path: str) -> dict[str, Any]:
    """Read ``path`` (``{}`` when empty); unknown keys are an error naming them."""
    try:
        data = read_config_file(path)
    except StartupError as exc:
        raise ClientError(str(exc)) from None
    unknown = sorted(k for k in data if k not in CONFIG_KEYS)
    if unknown:
        raise ClientError(f"Unknown a2a-client config key(s): {', '.join(k.replace('_', '-') for k in unknown)}. "
                          "See docs/client.md for the keys.")
    if "route" in data and "routes" not in data:
        data["routes"] = data.pop("route")
    return data


class Settings:
    """Resolves one setting at a time for the running subcommand."""

    def __init__(self, ctx: click.Context, config: Mapping[str, Any],
                 environ: Mapping[str, str] | None = None) -> None:
        self._ctx = ctx
        self._config = config
        self._env = os.environ if environ is None else environ

    def given(self, name: str) -> bool:
        """Whether ``--<name>`` was on the command line."""
        return self._ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.PROMPT)

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._ctx.params and self.given(name):
            return self._ctx.params[name]
        if name in self._config:
            value = self._config[name]
            return default if value is None else value
        if name in AUTH_ENV and self._env.get(AUTH_ENV[name]):
            return self._env[AUTH_ENV[name]]
        if name in self._ctx.params:
            return self._ctx.params[name]
        return default

    def text(self, name: str, default: str = "") -> str:
        value = self.get(name, default)
        return "" if value is None else str(value).strip()

    def required(self, name: str) -> str:
        value = self.text(name)
        if not value:
            flag = name.replace("_", "-")
            raise ClientError(f"{flag} is required. Provide --{flag} or {flag} in --config.")
        return value

    def integer(self, name: str) -> int | None:
        value = self.get(name)
        if value in (None, ""):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ClientError(f"{name.replace('_', '-')} must be an integer.") from None

    def number(self, name: str, default: float) -> float:
        value = self.get(name, default)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ClientError(f"{name.replace('_', '-')} must be a number of seconds.") from None
        if number <= 0:
            raise ClientError(f"{name.replace('_', '-')} must be positive.")
        return number

    def flag(self, name: str) -> bool | None:
        value = self.get(name)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("false", "no", "0", "off", ""):
            return False
        raise ClientError(f"{name.replace('_', '-')} must be true or false.")

    def api_key_header(self) -> str:
        return self.text("api_key_header") or DEFAULT_API_KEY_HEADER
