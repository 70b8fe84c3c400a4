"""The version of the plugin API and the rule that decides whether a plugin may load.

Kept apart from :mod:`iac_code.api` (which re-exports it) so the plugin manager can check a
plugin's declaration without importing the whole API surface it guards.
"""

from __future__ import annotations

import re

API_VERSION = "1.0"
"""The version of :mod:`iac_code.api`: a new minor adds names, a new major removes or changes one."""

API_VERSION_ATTRIBUTE = "IAC_CODE_API_VERSION"
"""The module attribute in which a plugin declares the API version it was built for."""

_VERSION = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})")


def api_version_problem(declared: object) -> str | None:
    """Why a plugin built for API ``declared`` cannot run on this kernel, or ``None`` when it can.

    ``declared`` must be a ``"MAJOR.MINOR"`` string; it is compatible when its major equals
    ours and its minor is not newer than ours (a plugin may use only names that exist).
    """
    match = _VERSION.fullmatch(declared) if isinstance(declared, str) else None
    if match is None:
        shown = " ".join(repr(declared).split())  # one line, whatever the object's repr is
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"declares {API_VERSION_ATTRIBUTE} = {shown}, which is not a 'MAJOR.MINOR' string"
    major, minor = int(match.group(1)), int(match.group(2))
    ours_major, ours_minor = (int(part) for part in API_VERSION.split("."))
    if major != ours_major or minor > ours_minor:
        return f"built for plugin API {major}.{minor}; this iac-code provides API {API_VERSION}"
    return None
