"""The one configuration loader: YAML file + CLI overrides + environment.

Keys may be written with dashes or underscores (``persistence-dir`` ≡
``persistence_dir``, recursively). String values get ``~`` and ``${VAR}``
expansion. Plugins contribute their own top-level keys through the
``iac_code_config_model`` hook; an unknown key or a wrong type is a start-up
error naming the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model, field_validator

from iac_code.base.errors import ConfigProblems, StartupError
from iac_code.base.url_credentials import MASK, mask_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 41242
DEFAULT_TRANSPORT = "http"
DEFAULT_API_KEY_HEADER = "X-API-Key"

AUTH_ENV = {
    "token": "IACCODE_A2A_HTTP_TOKEN",
    "basic_username": "IACCODE_A2A_BASIC_USERNAME",
    "basic_password": "IACCODE_A2A_BASIC_PASSWORD",
    "api_key": "IACCODE_A2A_API_KEY",
    "api_key_header": "IACCODE_A2A_API_KEY_HEADER",
}
RUN_MODES = ("normal", "pipeline")
MODE_ENV = "IAC_CODE_MODE"  # "pipeline" (trimmed, any case) selects pipeline mode; anything else is normal
PIPELINE_NAME_ENV = "IAC_CODE_PIPELINE_NAME"
DEFAULT_PIPELINE = "selling"


def default_config_dir() -> Path:
    """``IAC_CODE_CONFIG_DIR`` or ``~/.iac-code``."""
    return Path(os.environ.get("IAC_CODE_CONFIG_DIR") or Path.home() / ".iac-code")


class SkillConfig(BaseModel):
    """One Agent Card skill declared in configuration (for brought-in executors)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    input_modes: list[str] = Field(default_factory=list)
    output_modes: list[str] = Field(default_factory=list)


class AgentCardConfig(BaseModel):
    """Agent Card fields that replace the built-in iac-code ones."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    version: str | None = None
    organization: str | None = None
    skills: list[SkillConfig] | None = None
    default_input_modes: list[str] | None = None
    default_output_modes: list[str] | None = None


class PermissionRulesConfig(BaseModel):
    """Permission rules: tool-name globs, or exact ``aliyun_api(product:Action)`` entries."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


PERMISSION_WAIT_KEYS = ("resident_timeout_seconds", "sub_pipeline_timeout_seconds", "timeout_grace_seconds")
DEFAULT_TIMEOUT_GRACE = 30.0


class PermissionWaitConfig(BaseModel):
    """``permission-wait``: how long a durable permission wait stays live (since-0.13 §4.1).

    ``resident_timeout_seconds`` (``None``: forever) is how long a resumable question keeps its turn
    alive before it is suspended (the turn ends, the task stays INPUT_REQUIRED and the answer resumes it
    later); when it is not written, ``permission-timeout`` gives it (``0``: forever). An answer still wins
    ``timeout_grace_seconds`` after that deadline. ``sub_pipeline_timeout_seconds`` is validated and
    kept: no installed pipeline asks sub-pipeline (candidate) permissions.
    """

    model_config = ConfigDict(extra="forbid")

    resident_timeout_seconds: float | None = None
    sub_pipeline_timeout_seconds: float | None = None
    timeout_grace_seconds: float | None = DEFAULT_TIMEOUT_GRACE

    @property
    def grace(self) -> float:
        """The grace window in seconds (``null`` written: the default 30)."""
        return DEFAULT_TIMEOUT_GRACE if self.timeout_grace_seconds is None else self.timeout_grace_seconds

    def resident(self, permission_timeout: float) -> float | None:
        """The resident timeout in force: the written one, else ``permission-timeout`` (``0``: none)."""
        if "resident_timeout_seconds" in self.model_fields_set:
            return self.resident_timeout_seconds
        return permission_timeout or None


def parse_permission_wait(value: Any) -> Any:
    """Check ``permission-wait`` with the since-0.13 §4.1 texts (our key spelling); returns the checked mapping."""
    if value is None or isinstance(value, PermissionWaitConfig):
        return value if value is not None else {}
    if not isinstance(value, dict):
        raise ValueError("permission-wait must be an object.")
    unknown = sorted(str(k).replace("_", "-") for k in value if k not in PERMISSION_WAIT_KEYS)
    if unknown:
        raise ValueError(f"Unknown permission-wait fields: {', '.join(unknown)}.")
    for key, item in value.items():
        name = f"permission-wait.{key.replace('_', '-')}"
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, int | float) or item != item or item in (
                float("inf"), float("-inf")):
            raise ValueError(f"{name} must be null or a finite number.")
        if key == "timeout_grace_seconds" and item < 0:
            raise ValueError(f"{name} must be null or a finite non-negative number.")
        if key != "timeout_grace_seconds" and item <= 0:
            raise ValueError(f"{name} must be null or a finite positive number.")
    return value


THINKING_TYPES = {"tool-trace": "tool_trace", "raw-thinking": "raw_thinking"}
THINKING_OFF = frozenset({"none", "off", "false", "0", ""})
THINKING_SUPPORTED = "Supported values: raw-thinking, tool-trace."


def parse_thinking_exposure(value: Any) -> frozenset[str]:
    """``thinking-exposure`` → enabled types (``tool_trace``, ``raw_thinking``); unset → tool_trace."""
    if value is None:
        return frozenset({"tool_trace"})
    if isinstance(value, str):
        items = [v for v in re.split(r"[,;]", value)]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise ValueError(f"A2A thinking exposure must be a string or list of strings. {THINKING_SUPPORTED}")
    enabled: set[str] = set()
    for item in items:
        token = item.strip().lower().replace("_", "-")
        if token in THINKING_OFF:
            continue
        if token in ("all", "*"):
            enabled.update(THINKING_TYPES.values())
        elif token in THINKING_TYPES:
            enabled.add(THINKING_TYPES[token])
        else:
            raise ValueError(
                f"Unsupported A2A thinking exposure type '{token.replace('-', '_')}'. {THINKING_SUPPORTED}")
    return frozenset(enabled)


class ServerConfig(BaseModel):
    """The kernel's own settings. Plugins add theirs by model inheritance."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    host: str = Field(DEFAULT_HOST, description="Bind host.")
    port: int = Field(DEFAULT_PORT, ge=0, le=65535, description="Bind port (0 picks a free one).")
    transport: list[str] = Field(default_factory=lambda: [DEFAULT_TRANSPORT],
                                 description="Transport plugin name, or a list of them served by one process.")
    log_to_stdout: bool = Field(False, description="Mirror logs to stdout.")
    debug: bool = Field(False, description="Debug logging.")

    token: str = Field("", description="Bearer token; falls back to IACCODE_A2A_HTTP_TOKEN.")
    basic_username: str = Field("", description="Basic auth user; falls back to IACCODE_A2A_BASIC_USERNAME.")
    basic_password: str = Field("", description="Basic auth password; falls back to IACCODE_A2A_BASIC_PASSWORD.")
    api_key: str = Field("", description="API key; falls back to IACCODE_A2A_API_KEY.")
    api_key_header: str = Field("", description="API key header; falls back to IACCODE_A2A_API_KEY_HEADER, then X-API-Key.")
    card_public: bool = Field(
        False, description="Serve GET /.well-known/agent-card.json without credentials (every other route still "
        "needs them).")

    persistence_dir: str = Field("", description="State directory (default <config-dir>/a2a).")
    artifact_dir: str = Field("", description="Artifact payload directory (default <persistence-dir>/artifacts).")
    artifact_inline_bytes: int = Field(
        65536, ge=0, description="Text artifacts up to this size are also given inline, as a text part (0: never).")
    context_idle_timeout: float = Field(3600.0, gt=0, description="Seconds before an idle context leaves memory.")

    card_signer: str = Field(
        "", description="Agent Card signer plugin: hmac (HS256) or jwks (asymmetric); default hmac when a "
        "signing secret is set, else unsigned.")
    signing_secret: str = Field("", description="HS256 Agent Card signing secret (kid 'default').")
    signing_secrets: dict[str, str] = Field(
        default_factory=dict, description="HS256 secrets by kid; signing-kid names the one that signs.")
    signing_kid: str = Field("", description="The kid of signing-secrets that signs (default: the only one).")

    agent_runtime: str = Field("offline", description="Agent runtime plugin name.")
    agent_executor: str = Field("", description="An a2a-sdk AgentExecutor as 'package.module:attr'; overrides agent-runtime.")
    agent_card: AgentCardConfig = Field(default_factory=AgentCardConfig, description="Agent Card overrides.")
    mode: Literal["normal", "pipeline"] = Field(
        "normal", description="normal (chat turns) or pipeline (the step-by-step selling pipeline) for requests "
        "that do not choose (metadata.iac_code.run_mode); falls back to IAC_CODE_MODE.")
    pipeline_name: str = Field(
        DEFAULT_PIPELINE, description="The pipeline pipeline mode runs unless a request or its session names one; "
        "falls back to IAC_CODE_PIPELINE_NAME.")

    disabled_plugins: list[str] = Field(default_factory=list, description="Plugin names not to load.")
    max_request_bytes: int = Field(16 * 1024 * 1024, gt=0, description="Largest accepted request body.")
    required_extensions: list[str] = Field(default_factory=list, description="Extension URIs callers must request.")
    thinking_exposure: Any = Field(
        None, description="Enabled signal types: tool-trace (default), raw-thinking; list or comma string.")
    auto_approve_permissions: bool = Field(
        False, description="Approve tool permissions without asking (never protected cloud write APIs).")
    permission_rules: PermissionRulesConfig = Field(default_factory=PermissionRulesConfig,
                                                    description="allow/deny rules decided without asking.")
    permission_timeout: float = Field(
        900.0, ge=0, description="Seconds a permission question waits for its answer before it is denied (0: forever); "
        "a resumable one is suspended instead, unless permission-wait.resident-timeout-seconds is written.")
    permission_wait: PermissionWaitConfig = Field(
        default_factory=PermissionWaitConfig,
        description="Durable permission waits: resident-timeout-seconds, sub-pipeline-timeout-seconds, "
                    "timeout-grace-seconds (see Permissions).")
    max_active_turns_per_caller: int = Field(
        100, ge=0, description="Turns one caller may have running or paused at once (0: no limit).")
    context_cache_size: int = Field(
        1000, gt=0, description="Idle contexts kept in memory; older ones are restored from their snapshots.")
    task_store: str = Field(
        "local", description="Where tasks, contexts and push configs live: local (this process's persistence-dir) "
                             "or a shared backend plugin such as redis (several nodes, one service).")
    stream_resume_events: int = Field(
        512, gt=0, description="Stream events kept per task for resuming a stream (Last-Event-ID).")
    stream_resume_tasks: int = Field(
        256, gt=0, description="Tasks whose recent stream events are kept for resuming (least recently written out).")
    task_cache_size: int = Field(
        1000, gt=0, description="Whole tasks kept in memory; older ones are read back from their snapshots.")
    permission_audit_log: str = Field("", description="Audit log file (default <persistence-dir>/audit/permissions.jsonl).")
    shutdown_drain_seconds: float = Field(
        0.0, ge=0, description="Seconds the server keeps serving after a stop signal with /ready answering 503 "
        "(for load balancers), before the transports close.")
    log_format: str = Field("text", description="Log lines as text, or json (one JSON object per line).")
    shutdown_grace_seconds: float = Field(
        10.0, ge=0, description="Seconds in-flight requests of a closing connection or server get before they "
        "are cancelled.")

    # Not a configuration key: the file these settings were read from (set by load_config),
    # so the server can refuse it as input (iac_code.security.workspace.ProtectedPaths).
    _config_file: str = PrivateAttr("")
    # Not a configuration key: the keys the file, the CLI or the environment set (load_config),
    # as opposed to defaults; a dependent option is refused only when it was written.
    _explicit_keys: frozenset[str] | None = PrivateAttr(None)

    @field_validator("transport", mode="before")
    @classmethod
    def _transport_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part for part in (p.strip() for p in value.split(",")) if part]
        if isinstance(value, list | tuple):
            if not value:
                raise ValueError("name at least one transport")
            if not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError("transport names must be non-empty strings")
            return [v.strip() for v in value]
        return value

    @field_validator("permission_wait", mode="before")
    @classmethod
    def _check_permission_wait(cls, value: Any) -> Any:
        return parse_permission_wait(value)

    @field_validator("thinking_exposure")
    @classmethod
    def _check_thinking(cls, value: Any) -> Any:
        parse_thinking_exposure(value)
        return value

    @field_validator("log_format")
    @classmethod
    def _check_log_format(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in ("text", "json"):
            raise ValueError("log-format: must be text or json")
        return value

    @field_validator("card_signer")
    @classmethod
    def _signer_name(cls, value: str) -> str:
        return value.strip().lower().replace("_", "-")

    @property
    def effective_card_signer(self) -> str:
        """``card-signer``, or ``hmac`` when a signing secret is configured, else ``""`` (unsigned)."""
        return self.card_signer or ("hmac" if self.signing_secret or self.signing_secrets else "")

    @property
    def thinking_types(self) -> frozenset[str]:
        return parse_thinking_exposure(self.thinking_exposure)

    def resolved_audit_log(self) -> Path:
        return Path(self.permission_audit_log) if self.permission_audit_log else (
            self.resolved_persistence_dir() / "audit" / "permissions.jsonl")

    @property
    def config_file(self) -> Path | None:
        """The configuration file these settings came from, if any."""
        return Path(self._config_file) if self._config_file else None

    @property
    def explicit_keys(self) -> frozenset[str]:
        """The settings that were written (file, CLI or environment), spelled with underscores."""
        return self._explicit_keys if self._explicit_keys is not None else frozenset(self.model_fields_set)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.token or (self.basic_username and self.basic_password) or self.api_key)

    def resolved_persistence_dir(self) -> Path:
        return Path(self.persistence_dir) if self.persistence_dir else default_config_dir() / "a2a"

    def resolved_artifact_dir(self) -> Path:
        return Path(self.artifact_dir) if self.artifact_dir else self.resolved_persistence_dir() / "artifacts"


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: Any) -> Any:
    if isinstance(value, str):
        value = _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
        if value.startswith("~"):
            value = os.path.expanduser(value)
        return value
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


# Settings whose value is a map of data (key ids), not of setting names: their keys stay as written.
DATA_MAP_KEYS = frozenset({"signing_secrets"})


def normalise_keys(value: Any) -> Any:
    """Spell every mapping key with underscores, recursively (not inside :data:`DATA_MAP_KEYS` values)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k).replace("-", "_")
            out[key] = v if key in DATA_MAP_KEYS else normalise_keys(v)
        return out
    if isinstance(value, list):
        return [normalise_keys(v) for v in value]
    return value


# What PyYAML's context says about where the problem began: the bracket or quote that is still open.
_OPENED = {"while parsing a flow sequence": "'['", "while parsing a flow mapping": "'{'",
           "while scanning a quoted scalar": "quoted string"}


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong with a YAML text and where, from PyYAML's marks.

    The problem mark is where the parser gave up; the context mark, when there is one,
    is where the construct it was reading began, which for an unclosed bracket or quote
    is the line to fix: both are named.
    """
    problem = str(getattr(exc, "problem", "") or "").strip() or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    text = f"{problem} on {_at(mark)}" if mark is not None else problem
    context = str(getattr(exc, "context", "") or "").strip()
    started = getattr(exc, "context_mark", None)
    if context in _OPENED and started is not None:
        closing = {"'['": "']'", "'{'": "'}'"}.get(_OPENED[context], "closing quote")
        return f"in the {_OPENED[context]} opened on {_at(started)}: {text} (is a {closing} missing?)"
    if "'\\t'" in problem:  # PyYAML names a tab as '\t'
        text += " (indent with spaces: YAML does not allow tabs there)"
    if context and started is not None and (mark is None or started.line != mark.line):
        text += f" ({context} started on {_at(started)})"
    return text


def read_config_file(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Read and normalise a YAML configuration file (``{}`` when ``path`` is empty)."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise StartupError(f"Cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StartupError(f"Config file {path} is not valid YAML: {yaml_problem(exc)}.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StartupError("A2A config file must contain a YAML mapping.")
    return _expand(normalise_keys(data))


def build_config_model(extra_models: list[tuple[str, type[BaseModel]]]) -> type[ServerConfig]:
    """Combine the kernel's model with each plugin's; a key declared twice is an error."""
    owners: dict[str, str] = {name: "iac-code" for name in ServerConfig.model_fields}
    bases: list[type[BaseModel]] = []
    for plugin, model in extra_models:
        for key in model.model_fields:
            if key in owners:
                raise StartupError(
                    f"Configuration key {key.replace('_', '-')!r} is declared by both {owners[key]} and {plugin}"
                )
            owners[key] = plugin
        bases.append(model)
    if not bases:
        return ServerConfig
    return create_model("IacCodeConfig", __base__=(ServerConfig, *bases))  # type: ignore[call-overload,no-any-return]


# Keys of first-party plugin distributions: written while the plugin is missing (not installed,
# or blocked by disabled-plugins), the error names the plugin and the extra that installs it.
PLUGIN_KEYS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("metrics", "metrics_public", "metrics_port", "metrics_host"), ("metrics", "a2a")),
    "tracing": ("tracing", "a2a"),
    **dict.fromkeys(("push_notifications", "push_queue", "push_events", "push_delivery", "push_timeout",
                     "push_max_attempts", "push_retry_base_delay", "push_retry_max_delay", "push_concurrency",
                     "push_lease_timeout_ms", "push_signing", "push_allowed_hosts"), ("push", "a2a")),
    "card_legacy_fields": ("compat-v03", "a2a"),
    **dict.fromkeys(("pipeline_batch_max_events", "pipeline_batch_max_bytes", "pipeline_batch_delay_ms",
                     "backup_dir", "backup_tmp_dir"), ("pipeline-selling", "a2a")),
    **dict.fromkeys(("deployer", "ros_endpoint", "ros_region", "ros_access_key_id", "ros_access_key_secret",
                     "ros_poll_interval_seconds", "ros_wait_timeout_seconds", "ros_stack_timeout_minutes"),
                    ("pipeline-selling", "a2a")),
    **dict.fromkeys(("price_source", "pricing_file", "bss_endpoint", "bss_region", "bss_access_key_id",
                     "bss_access_key_secret", "pipeline_selling_review_step"), ("pipeline-selling", "a2a")),
    **dict.fromkeys(("resource_selector_region", "resource_selector_ecs_endpoint", "resource_selector_vpc_endpoint",
                     "resource_selector_access_key_id", "resource_selector_access_key_secret",
                     "resource_selector_security_token", "resource_selector_query_timeout_seconds"),
                    ("resource-selector", "a2a")),
}


def _describe(error: Mapping[str, Any]) -> str:
    loc = ".".join(str(p).replace("_", "-") if isinstance(p, str) else str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        owner = PLUGIN_KEYS.get(str(error["loc"][0])) if len(error["loc"]) == 1 else None
        if owner is not None:
            return (f"unknown configuration key '{loc}': it belongs to the {owner[0]!r} plugin, which is not "
                    f"installed or is blocked by disabled-plugins (install it with: pip install 'iac-code[{owner[1]}]')")
        return f"unknown configuration key '{loc}'"
    if error["type"] == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return f"'{loc}': {error['msg']}"


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    model: type[ServerConfig] = ServerConfig,
    environ: Mapping[str, str] | None = None,
    raw: Mapping[str, Any] | None = None,
) -> ServerConfig:
    """Load the configuration: file, then explicit CLI overrides, then env fallbacks for auth.

    ``path`` is read unless ``raw`` (its already-read content) is given; either way it is
    recorded as :attr:`ServerConfig.config_file`.
    """
    env = os.environ if environ is None else environ
    data = dict(raw) if raw is not None else read_config_file(path)
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    for key, var in AUTH_ENV.items():
        if not data.get(key) and env.get(var):
            data[key] = env[var]
    if "mode" not in data and env.get(MODE_ENV) is not None:
        data["mode"] = "pipeline" if env[MODE_ENV].strip().lower() == "pipeline" else "normal"
    if not data.get("pipeline_name") and (env.get(PIPELINE_NAME_ENV) or "").strip():
        data["pipeline_name"] = env[PIPELINE_NAME_ENV].strip()
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise ConfigProblems([f"Invalid configuration: {_describe(e)}" for e in exc.errors()]) from None
    config._explicit_keys = frozenset(config.model_fields_set)
    if not config.api_key_header:
        config.api_key_header = DEFAULT_API_KEY_HEADER
    if path:
        config._config_file = os.path.abspath(path)
    return config


def key_name(key: str) -> str:
    """A setting as YAML spells it (``task_store_redis_url`` → ``task-store-redis-url``)."""
    return key.replace("_", "-")


def without_effect(config: Any, keys: Iterable[str], needs: str) -> list[str]:
    """One problem line for each of ``keys`` that was written although it does nothing without ``needs``.

    For the ``iac_code_check_config`` hook: a plugin calls it with the keys that only matter
    when ``needs`` holds (e.g. ``"card-signer: jwks"``) once it found that ``needs`` does not.
    """
    written = getattr(config, "explicit_keys", frozenset())
    return [f"'{key_name(key)}' has no effect without '{needs}': set '{needs}' or remove '{key_name(key)}'."
            for key in keys if key in written]


def in_conflict(config: Any, keys: Iterable[str], other: str) -> list[str]:
    """One problem line for each of ``keys`` that was written although ``other`` makes it do nothing."""
    written = getattr(config, "explicit_keys", frozenset())
    return [f"'{key_name(key)}' has no effect with '{other}': remove '{key_name(key)}'."
            for key in keys if key in written]


_SECRET_NAME = re.compile(r"(secret|password|token(?!s)|api_key$|credential)")  # not llm-context-tokens


def _masked(name: str, value: Any) -> Any:
    if _SECRET_NAME.search(name):
        if isinstance(value, dict):
            return {k: MASK if v else v for k, v in value.items()}
        return MASK if value else value
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    if isinstance(value, dict):
        return {k: _masked(str(k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(name, v) for v in value]
    return value


def masked_settings(config: BaseModel) -> dict[str, Any]:
    """The effective settings as YAML would spell them, with every secret value masked (``--check-config``)."""
    return {key.replace("_", "-"): _masked(key, value) for key, value in config.model_dump().items()}
