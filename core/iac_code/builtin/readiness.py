"""Built-in plugin: ``GET /iac-code/readiness``, whether the model and the cloud account are configured.

Beside ``/ready`` (is the server up), this says whether a turn can use a model and reach
Alibaba Cloud, from configuration alone: no network call, never a secret.

* ``llm``: the agent runtime's own report when it has one (``readiness()``, see
  :class:`~iac_code.agents.runtime.AgentRuntime`), else the runtime's name as a ready provider.
* ``cloud``: the server's Alibaba Cloud credentials (``ALIBABA_CLOUD_ACCESS_KEY_ID``,
  ``ALIBABA_CLOUD_ACCESS_KEY_SECRET``, optional ``ALIBABA_CLOUD_SECURITY_TOKEN`` and
  ``ALIBABA_CLOUD_REGION_ID``), what the built-in ``aliyun_api`` tool uses.

Authentication applies as on every route.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from iac_code.base import jsonio
from iac_code.base.hookspecs import hookimpl
from iac_code.base.records import HttpRouteSpec

if TYPE_CHECKING:
    from aiohttp import web

    from iac_code.base.records import PluginContext

READINESS_PATH = "/iac-code/readiness"
DEFAULT_REGION = "cn-hangzhou"
LLM_KEYS = ("ready", "source", "provider", "providerDisplay", "model", "missing")
LLM_MISSING = frozenset({"partner_configuration", "provider", "model", "api_key", "configuration"})


def cloud_readiness(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``cloud`` part: the credential mode (``AK`` or ``StsToken``), region and what is missing."""
    def value(name: str) -> str:
        return (environ.get(f"ALIBABA_CLOUD_{name}") or "").strip()

    key_id, secret, token = value("ACCESS_KEY_ID"), value("ACCESS_KEY_SECRET"), value("SECURITY_TOKEN")
    region = value("REGION_ID") or DEFAULT_REGION
    if not key_id and not secret:
        return {"ready": False, "provider": "aliyun", "mode": None, "regionId": region, "missing": ["credentials"]}
    missing = [name for name, given in (("access_key_id", key_id), ("access_key_secret", secret)) if not given]
    return {"ready": not missing, "provider": "aliyun", "mode": "StsToken" if token else "AK", "regionId": region,
            "missing": missing}


def llm_readiness(runtime: Any) -> dict[str, Any]:
    """The ``llm`` part, from the runtime's ``readiness()`` (unknown keys dropped, missing ones ``None``)."""
    report = getattr(runtime, "readiness", None)
    if callable(report):
        given = report()
        result = {key: given.get(key) for key in LLM_KEYS}
        result["ready"] = bool(result["ready"])
        missing = given.get("missing")
        result["missing"] = [m for m in missing if m in LLM_MISSING] if isinstance(missing, list) else []
        return result
    name = getattr(runtime, "name", None) if runtime is not None else None
    return {"ready": True, "source": "runtime" if name else "agent-executor", "provider": name,
            "providerDisplay": name, "model": None, "missing": []}


def readiness(kernel: Any, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole body (schemaVersion 1)."""
    executor = getattr(kernel, "executor", None)
    runtime = getattr(executor, "runtime", None)
    runtime = getattr(runtime, "chat", runtime)  # a mode router: its chat runtime answers for the model
    return {"schemaVersion": 1, "llm": llm_readiness(runtime),
            "cloud": cloud_readiness(os.environ if environ is None else environ)}


@hookimpl
def iac_code_http_routes(kernel: PluginContext | None) -> list[HttpRouteSpec]:
    if kernel is None:
        return []
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=jsonio.dumps(readiness(kernel)), content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    return [HttpRouteSpec("GET", READINESS_PATH, handle, name="readiness")]
