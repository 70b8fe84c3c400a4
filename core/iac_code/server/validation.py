"""The validation phase: everything that can be checked before anything binds or is read.

:func:`check_startup` runs after the configuration loaded (every key typed and known) and
before the state directory is locked, a socket binds or a snapshot is restored. It collects
every problem as one line instead of stopping at the first: the selected components are
installed (transports, task store, agent runtime, card signer), the push service's checks
pass (its push queue among them), no option was written that does nothing with the rest of
the settings (:data:`KERNEL_DEPENDENCIES`), and every plugin's own checks (the
``iac_code_check_config`` hook) pass. ``iac-code a2a`` and
``iac-code a2a --check-config`` run exactly this.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iac_code.base.config import in_conflict, without_effect
from iac_code.base.errors import ConfigProblems, StartupError

if TYPE_CHECKING:
    from iac_code.server.plugins import Plugins


@dataclass(frozen=True)
class Dependency:
    """Options that only matter when ``holds(config)``; written without it, each is a problem naming ``needs``.

    With ``conflict`` set, ``needs`` names the setting that makes them do nothing instead.
    """

    keys: tuple[str, ...]
    needs: str
    holds: Callable[[Any], bool]
    conflict: bool = False

    def problems(self, config: Any) -> list[str]:
        if self.holds(config):
            return []
        return (in_conflict if self.conflict else without_effect)(config, self.keys, self.needs)


def _no_executor(config: Any) -> bool:
    return not config.agent_executor


# The kernel's own dependent options (docs/configuration.md, "Options that depend on others").
KERNEL_DEPENDENCIES: tuple[Dependency, ...] = (
    Dependency(("signing_kid",), "signing-secrets", lambda c: bool(c.signing_secrets)),
    Dependency(("basic_username",), "basic-password", lambda c: bool(c.basic_password)),
    Dependency(("basic_password",), "basic-username", lambda c: bool(c.basic_username)),
    Dependency(("api_key_header",), "api-key", lambda c: bool(c.api_key)),
    # An a2a-sdk executor replaces iac-code's runtime, its permission questions and its signals.
    Dependency(("agent_runtime", "thinking_exposure", "auto_approve_permissions", "permission_rules",
                "permission_timeout", "permission_audit_log"), "agent-executor", _no_executor, conflict=True),
)

_EXECUTOR_REFERENCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _transports(config: Any, plugins: Plugins, problems: list[str]) -> list[str]:
    names: list[str] = []
    for name in config.transport:
        try:
            spec = plugins.transport(name)
        except StartupError as exc:
            problems.append(str(exc))
            continue
        if spec.name in names:
            problems.append(f"Transport {spec.name!r} is listed twice in 'transport'.")
            continue
        names.append(spec.name)
    return names


def _components(config: Any, plugins: Plugins, problems: list[str]) -> None:
    from iac_code.server.plugins import KNOWN_RUNTIMES, KNOWN_TASK_STORES, not_available

    store = config.task_store.strip().lower().replace("_", "-")
    if store != "local":
        backends = plugins.state_backends()
        if store not in backends:
            problems.append(not_available("Task store", store, ["local", *backends], KNOWN_TASK_STORES))
    if config.agent_executor:
        if not _EXECUTOR_REFERENCE.fullmatch(config.agent_executor):
            problems.append(f"agent-executor must look like 'package.module:attr', got {config.agent_executor!r}")
    else:
        runtimes = plugins.agent_runtimes()
        runtime = config.agent_runtime.strip().lower().replace("_", "-")
        if runtime not in runtimes:
            problems.append(not_available("Agent runtime", runtime, runtimes, KNOWN_RUNTIMES))
    signer = config.effective_card_signer
    if signer and signer not in plugins.card_signers():
        hint = " Install iac-code[a2a-signing]." if signer == "jwks" else ""
        problems.append(f"card-signer {signer!r} is not installed.{hint}")
    if signer != "hmac" and (config.signing_secret or config.signing_secrets):
        key = "signing-secret" if config.signing_secret else "signing-secrets"
        problems.append(f"'{key}' has no effect with 'card-signer: {signer}': remove it, or set 'card-signer: hmac'.")
    from iac_code.protocol.dispatcher import METHOD_PARAMS

    plugins.protocol_adapters(reserved=METHOD_PARAMS)  # a method name two adapters claim


def _push(config: Any, plugins: Plugins) -> list[str]:
    """The push service's own checks (the selected push queue is installed, no push key without push)."""
    push = plugins.push_service()
    if push is None or push.record.check is None:
        return []
    return push.record.check(config, set(plugins.push_queues()))


def check_startup(config: Any, plugins: Plugins) -> list[str]:
    """Every problem of ``config`` with these plugins, one line each (empty: the server may start)."""
    problems: list[str] = []
    transports = _transports(config, plugins, problems)
    try:
        _components(config, plugins, problems)
    except StartupError as exc:  # two plugins providing one component name
        problems.append(str(exc))
    try:
        problems += _push(config, plugins)
    except StartupError as exc:  # two push services, or two queues of one name
        problems.append(str(exc))
    for rule in KERNEL_DEPENDENCIES:
        problems += rule.problems(config)
    problems += plugins.check_config(config, transports)
    return list(dict.fromkeys(problems))  # the same line from two places once


def ensure_valid(config: Any, plugins: Plugins) -> None:
    """:func:`check_startup`, raising :class:`~iac_code.base.errors.ConfigProblems` when it found anything."""
    problems = check_startup(config, plugins)
    if problems:
        raise ConfigProblems(problems)
