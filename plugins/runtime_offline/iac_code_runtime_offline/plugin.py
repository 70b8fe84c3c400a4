"""The entry point: the ``offline`` runtime, the tools it (and any other runtime) calls by name, and the
``offline`` IaC engine that pipelines use.

The engine itself (catalogs, HCL parser, the ROS SDK) loads when a tool first runs.
"""

from __future__ import annotations

from iac_code_runtime_offline.iac_engine import iac_code_iac_engines
from iac_code_runtime_offline.runtime import iac_code_agent_runtimes
from iac_code_runtime_offline.tools import iac_code_tools

IAC_CODE_API_VERSION = "1.0"

__all__ = ["IAC_CODE_API_VERSION", "iac_code_agent_runtimes", "iac_code_iac_engines", "iac_code_tools"]
