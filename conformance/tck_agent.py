"""The conformance kit's own reference agent, loaded unchanged for ``agent-executor:``.

``A2A_TCK_DIR`` names a checkout of a2aproject/a2a-tck. Its
``sut/a2a-python/sut_agent.py`` holds ``TckAgentExecutor`` (the agent) and a
``main()`` that starts a2a-sdk's own Starlette/uvicorn servers from modules
a2a-sdk 1.3 no longer has. Only the agent is taken: the file's imports are run
one by one, the class is executed from the file's own source text, and an
import that fails is an error only when the class uses a name it binds.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

AGENT_CLASS = "TckAgentExecutor"


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    return [(alias.asname or alias.name).split(".")[0] for alias in node.names]


def load(tck_dir: str, class_name: str = AGENT_CLASS) -> Any:
    """Return the kit's agent executor class from ``<tck_dir>/sut/a2a-python/sut_agent.py``."""
    source_path = Path(tck_dir, "sut", "a2a-python", "sut_agent.py")
    if not tck_dir or not source_path.is_file():
        raise RuntimeError("Set A2A_TCK_DIR to a checkout of a2aproject/a2a-tck (see docs/conformance.md)")
    tree = ast.parse(source_path.read_text(encoding="utf-8"), filename=str(source_path))
    agent = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if agent is None:
        raise RuntimeError(f"{source_path} defines no {class_name}")
    used = {n.id for n in ast.walk(agent) if isinstance(n, ast.Name)}
    namespace: dict[str, Any] = {"__name__": "a2a_tck_sut_agent", "__file__": str(source_path)}
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(source_path), "exec"), namespace)
        except ImportError as exc:
            needed = used.intersection(_bound_names(node))
            if needed:
                raise RuntimeError(f"{class_name} needs {sorted(needed)}, which cannot be imported: {exc}") from None
    exec(compile(ast.Module(body=[agent], type_ignores=[]), str(source_path), "exec"), namespace)
    return namespace[class_name]


TckAgentExecutor = load(os.environ.get("A2A_TCK_DIR", ""))
