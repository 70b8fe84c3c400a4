"""Every hook of the iac-code plugin system, in one module.

Hooks are plain synchronous pluggy hooks. Component hooks return lists of the
typed records in :mod:`iac_code.base.records`; the kernel collects the results of
all plugins (none of these hooks is ``firstresult``) and selects
implementations by configured name. Objects that do I/O expose ``async``
methods that the kernel awaits; the hooks themselves never block.

Plugins implement hooks with ``iac_code.hookimpl`` and register under the
``iac_code`` entry-point group (the entry name is the plugin's short name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pydantic import BaseModel

    from iac_code.base.instrumentation import Instrumentation
    from iac_code.base.records import (
        AgentRuntimeSpec,
        CardExtension,
        CardSignerSpec,
        CliCommandSpec,
        HttpRouteSpec,
        IacEngineSpec,
        InterfaceInfo,
        PartDecoderSpec,
        PipelineSpec,
        PluginContext,
        PriceSourceSpec,
        ProtocolAdapterSpec,
        PushQueueSpec,
        PushServiceSpec,
        RouterSpec,
        StateBackendSpec,
        ToolSpec,
        TransportSpec,
    )
    from iac_code.base.turn_gates import TurnGateSpec

PROJECT_NAME = "iac_code"
ENTRY_POINT_GROUP = "iac_code"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------------- configuration


@hookspec
def iac_code_config_model() -> type[BaseModel] | None:
    """Contribute the plugin's own configuration keys.

    Called once at start-up, before the configuration file is validated.

    :return: a pydantic model whose fields become top-level configuration keys
        (``my_key`` is written ``my-key`` or ``my_key`` in YAML), or ``None``.
        Give every field a default and a ``description``. Two plugins declaring
        the same key is a start-up error naming both.
    """


@hookspec
def iac_code_check_config(config: Any, transports: list[str]) -> list[str] | None:
    """Report what is wrong with the effective configuration, before anything binds or is read.

    Called once at start-up, and by ``iac-code a2a --check-config``, after every key
    validated and before the state directory is locked, a socket binds or state is restored;
    every plugin is asked, so a plugin checks what it owns: its keys (a required one missing,
    one that does nothing with the rest of the settings, two that conflict), the extras and
    dependencies its selected components need, and addresses its transports would share.
    Keep it cheap and free of side effects: no connection, no file written.

    :param config: the effective settings (every plugin's keys; ``config.explicit_keys`` are
        the ones that were written, as opposed to defaults).
    :param transports: the canonical names of the selected transports (aliases resolved).
    :return: one line per problem, naming the key and what to do; ``[]`` or ``None`` when fine.
        Every plugin's lines are printed together and the server exits 2.
    """


# --------------------------------------------------------------------------- components


@hookspec
def iac_code_transports() -> list[TransportSpec]:
    """Provide server transports (HTTP, gRPC, WebSocket, ...).

    Called when the kernel looks up the transport named by ``--transport``.

    :return: transport records; each ``create(kernel)`` returns a server that
        frames requests and hands them to ``kernel.dispatcher``.
    """


@hookspec
def iac_code_state_backends() -> list[StateBackendSpec]:
    """Provide shared state backends (``task-store`` setting; ``local`` is the kernel's own).

    Called once at start-up when ``task-store`` names a backend other than ``local``.

    :return: backend records; ``create(kernel)`` returns a
        :class:`~iac_code.base.cluster.StateBackend`: the task store every node shares, this
        node's :class:`~iac_code.base.cluster.NodeLink`, and the shared push-config records.
    """


@hookspec
def iac_code_push_services() -> list[PushServiceSpec]:
    """Provide push notifications: the push-config API's store, the sender, delivery.

    Called once when the kernel is built (and by the start-up checks), before anything
    binds. The kernel hands the service's a2a-sdk ``PushNotificationConfigStore`` and
    ``PushNotificationSender`` to its request handler, screens callback URLs with it,
    starts it after the transports bound and stops it after them; the Agent Card's
    ``pushNotifications`` is the service's ``enabled``. Without any, the server has no
    push notifications (the push-config methods answer -32003).

    :return: push service records (at most one may be installed); ``create(context)``
        receives a :class:`~iac_code.base.records.PushContext` and returns a
        :class:`~iac_code.base.records.PushService` (not started yet).
    """


@hookspec
def iac_code_push_queues() -> list[PushQueueSpec]:
    """Provide push-notification delivery queues (``push-queue`` setting).

    Called when the push service builds its queue (in the server, and in
    ``iac-code a2a push-worker``).

    :return: queue records; ``create(context)`` receives a
        :class:`~iac_code.base.push_jobs.QueueContext` and returns a
        :class:`~iac_code.base.push_jobs.PushQueue` (not started yet).
    """


@hookspec
def iac_code_card_signers() -> list[CardSignerSpec]:
    """Provide Agent Card signers and verifiers.

    Called when the Agent Card is built (signers) and when the client checks a
    remote card (verifiers).

    :return: signer records.
    """


@hookspec
def iac_code_card_extensions(config: Any, interfaces: list[InterfaceInfo]) -> list[CardExtension] | None:
    """Add entries to the Agent Card's ``capabilities.extensions``.

    Called whenever the card is built: at start-up (``interfaces`` still empty) and again once the
    transports bound (``interfaces`` as the card lists them), so an extension that needs a binding
    (an HTTP route, say) can look for it.

    :param config: the effective settings (the plugin's own keys among them).
    :param interfaces: the bound interfaces (``protocol_binding`` ``JSONRPC``, ``HTTP+JSON``, ``GRPC``, ...).
    :return: extension records, served after the kernel's own in plugin order; ``[]`` or ``None`` for none.
    """


@hookspec
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    """Provide decoders that turn incoming message parts into prompt input.

    Called once when the kernel builds its decoder table. Each record claims a
    part ``kind`` and media types; two records claiming the same pair is a
    start-up error naming both plugins.

    :return: decoder records.
    """


@hookspec
def iac_code_routers() -> list[RouterSpec]:
    """Provide routers that pick a remote agent for ``iac-code a2a-client``.

    Called when the client resolves which agent should receive a call.

    :return: router records, selected by name.
    """


@hookspec
def iac_code_agent_runtimes() -> list[AgentRuntimeSpec]:
    """Provide agent runtimes (``agent-runtime`` setting).

    Called when the kernel builds its executor. A runtime either speaks
    iac-code runtime events (:mod:`iac_code.agents.runtime`) or is an unchanged
    a2a-sdk ``AgentExecutor``.

    :return: runtime records.
    """


@hookspec
def iac_code_iac_engines() -> list[IacEngineSpec]:
    """Provide IaC engines: understand a request, write and review templates.

    Called when the kernel builds the pipelines; the first engine found serves them.

    :return: engine records.
    """


@hookspec
def iac_code_pipelines() -> list[PipelineSpec]:
    """Provide pipelines (``mode: pipeline``; ``pipeline-name`` or a request's ``pipeline_name``).

    Called when the kernel builds its executor; a pipeline runs as an agent runtime
    that the kernel selects per request.

    :return: pipeline records, selected by name.
    """


@hookspec
def iac_code_price_sources() -> list[PriceSourceSpec]:
    """Provide price sources: what a template's resources cost per month (``price-source`` setting).

    Called when the kernel builds the pipelines; a pipeline that prices candidates creates the one
    its settings name (the selling pipelines: ``price-source``, default ``price-table``).

    :return: price source records; ``create(context)`` returns a
        :class:`~iac_code.base.records.PriceSource` whose ``async estimate(resources, region=...)``
        names its source in every cost and reports, never prices at 0, what it cannot price.
    """


@hookspec
def iac_code_tools() -> list[ToolSpec]:
    """Provide tools that agent runtimes may call.

    Called when a runtime builds its tool table.

    :return: tool records, looked up by name by the runtimes.
    """


@hookspec
def iac_code_turn_gates() -> list[TurnGateSpec]:
    """Provide turn gates: features that hold a running turn at its safe points (execution control's pause),
    hear each turn start and end, may refuse a new turn on a context and annotate its status updates.

    Called once when the kernel builds its executor; every gate is active (none is selected by name).
    See :mod:`iac_code.base.turn_gates` for the safe points.

    :return: gate records; ``create(kernel)`` returns the server's
        :class:`~iac_code.base.turn_gates.TurnGate`, which the kernel starts after its transports bound
        and stops when it stops.
    """


@hookspec
def iac_code_http_routes(kernel: PluginContext) -> list[HttpRouteSpec]:
    """Add routes to the HTTP transport's aiohttp application.

    Called once by the HTTP transport while it builds its application.

    :param kernel: the running kernel (configuration, card, dispatcher).
    :return: route records; authentication applies unless ``auth=False``.
    """


@hookspec
def iac_code_instrumentation(config: Any) -> Instrumentation | None:
    """Observe the server: metrics, tracing, profiling.

    Called once when a server is built (and by ``iac-code a2a push-worker``), after the
    configuration validated and before anything binds.

    :param config: the effective settings (the plugin's own keys among them).
    :return: an :class:`~iac_code.base.instrumentation.Instrumentation` whose methods the kernel
        calls at its measuring points (its ``start`` before the transports bind, its ``stop``
        after the server stopped), or ``None`` when the configuration switches the feature
        off. Several plugins' objects are all called, in plugin order.
    """


@hookspec
def iac_code_protocol_adapters() -> list[ProtocolAdapterSpec]:
    """Answer another protocol version (A2A 0.3 clients) over the one A2A 1.0 call core.

    Called once when the kernel is built, before anything binds: the dispatcher answers the
    adapters' JSON-RPC method names on every transport, the HTTP transport serves their
    HTTP+JSON routes, and the Agent Card document may take their fields. An A2A 1.0 call
    never reaches an adapter.

    :return: adapter records; a method name claimed by two adapters, or an A2A 1.0 method
        name claimed at all, is a start-up error naming the plugins.
    """


# --------------------------------------------------------------------------- command line


@hookspec
def iac_code_cli_commands() -> list[CliCommandSpec]:
    """Add commands to the ``iac-code`` command line.

    Called when the command line is built, before any configuration is read; the
    commands' ``load`` callables run only when one of them is invoked or listed.

    :return: command records; a name already taken by the kernel or another plugin is a
        conflict reported with both distributions.
    """
