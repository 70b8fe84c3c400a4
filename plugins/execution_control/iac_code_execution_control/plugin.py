"""The entry point: the execution controller as a turn gate (``iac_code_turn_gates``), its card extension
(``iac_code_card_extensions``), its HTTP routes (``iac_code_http_routes``) and the same operations as
JSON-RPC methods for the other transports (``iac_code_protocol_adapters``: names that are not A2A methods).

The gate, the routes and the methods of one server share its controller: the gate's factory registers it
under the kernel object it was built for; routes and methods look it up when a request comes.
"""

from __future__ import annotations

import weakref
from typing import Any

from iac_code.api import (
    CardExtension,
    HttpRouteSpec,
    InterfaceInfo,
    PluginContext,
    ProtocolAdapterSpec,
    TurnGateSpec,
    hookimpl,
)
from iac_code_execution_control.controller import NODE_CALL, Controller
from iac_code_execution_control.record import PHASES
from iac_code_execution_control.routes import (
    METHODS,
    OPERATIONS,
    PAUSE_PATH,
    RECOVERY_PATH,
    RESUME_PATH,
    STATE_PATH,
    TERMINATE_PATH,
    http_handler,
    node_call,
    rpc_method,
)

IAC_CODE_API_VERSION = "1.0"
EXTENSION_URI = "urn:iac-code:a2a:execution-control:v1"
HTTP_BINDINGS = frozenset({"JSONRPC", "HTTP+JSON"})

_controllers: dict[int, tuple[weakref.ReferenceType[Any] | None, Controller]] = {}


def controller_for(kernel: Any) -> Controller | None:
    """The controller built for ``kernel`` (``None`` before the server built one)."""
    entry = _controllers.get(id(kernel))
    if entry is None:
        return None
    ref, controller = entry
    if ref is not None and ref() is not kernel:
        return None
    return controller


def _for_dispatcher(dispatcher: Any) -> tuple[PluginContext, Controller] | None:
    for ref, controller in list(_controllers.values()):
        kernel = ref() if ref is not None else controller.kernel
        if kernel is not None and getattr(kernel, "dispatcher", None) is dispatcher:
            return kernel, controller
    return None


def create_controller(kernel: PluginContext) -> Controller:
    """The server's execution controller, registered for its routes and JSON-RPC methods."""
    controller = Controller(kernel)
    try:
        ref: weakref.ReferenceType[Any] | None = weakref.ref(kernel, lambda _: _controllers.pop(id(kernel), None))
    except TypeError:
        ref = None
    _controllers[id(kernel)] = (ref, controller)
    if controller.link is not None:  # several nodes: requests for turns running here come from the others
        kernel.serve_node_call(NODE_CALL, node_call(kernel, controller))
    return controller


def extension_params() -> dict[str, Any]:
    """The card extension's ``params`` (§7)."""
    return {
        "schemaVersion": "1.0", "pauseEndpoint": PAUSE_PATH, "stateEndpoint": STATE_PATH,
        "resumeEndpoint": RESUME_PATH, "terminateEndpoint": TERMINATE_PATH,
        "sessionRecoveryEndpoint": RECOVERY_PATH, "phases": list(PHASES), "toolBatchDrainOnPause": True,
        "transportScope": "http",
    }


@hookimpl
def iac_code_turn_gates() -> list[TurnGateSpec]:
    return [TurnGateSpec(name="execution-control", create=create_controller,
                         description="Pauses, resumes and terminates a context's execution at its safe points.")]


@hookimpl
def iac_code_card_extensions(config: Any, interfaces: list[InterfaceInfo]) -> list[CardExtension]:
    """Advertised when an HTTP JSON-RPC or HTTP+JSON interface is bound (the routes are HTTP routes)."""
    if getattr(config, "agent_executor", ""):
        return []  # a brought-in a2a-sdk executor's turns have no safe points
    if not any(i.protocol_binding in HTTP_BINDINGS and i.url.startswith(("http://", "https://")) for i in interfaces):
        return []
    return [CardExtension(uri=EXTENSION_URI, required=False, params=extension_params(),
                          description="iac-code execution control: pause, resume and terminate a context's "
                                      "execution at safe points; session recovery.")]


@hookimpl
def iac_code_http_routes(kernel: PluginContext) -> list[HttpRouteSpec]:
    return [HttpRouteSpec(method, path, http_handler(kernel, lambda: controller_for(kernel), path),
                          name="execution-control:" + path.rsplit("/", 1)[-1])
            for path, (method, _) in OPERATIONS.items()]


@hookimpl
def iac_code_protocol_adapters() -> list[ProtocolAdapterSpec]:
    return [ProtocolAdapterSpec(name="execution-control",
                                methods={name: rpc_method(path, _for_dispatcher) for name, path in METHODS.items()})]
