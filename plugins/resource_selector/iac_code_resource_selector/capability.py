"""Whether the selector is offered (§9): the server enables it (``IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED``) and
the request declares ``metadata.iac_code.capabilities.resourceSelector`` with the server's profile hash."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from iac_code_resource_selector.profiles import PROFILE_HASH, PROFILES

ENV = "IAC_CODE_A2A_RESOURCE_SELECTOR_ENABLED"
TRUE = frozenset({"1", "true", "yes", "on"})
EXTENSION_URI = "urn:iac-code:resource-selector:v1"
QUERY_MODE = "ros_api_json"
EXTENSION_PARAMS: Mapping[str, Any] = {"schemaVersion": 1, "singleSelection": True, "derivedValue": True,
                                       "queryMode": QUERY_MODE}


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the server enables the feature (the environment variable is one of ``1,true,yes,on``)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return value.strip().lower() in TRUE


def not_offered(metadata: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """Why the selector is not offered on a turn (§9's reasons), ``None`` when it is."""
    if not enabled(environ):
        return "a2a_feature_disabled"
    capabilities = metadata.get("capabilities")
    declared = capabilities.get("resourceSelector") if isinstance(capabilities, Mapping) else None
    if declared is None:
        return "client_capability_missing"
    if not isinstance(declared, Mapping) or declared.get("schemaVersion") != 1 \
            or isinstance(declared.get("schemaVersion"), bool) or declared.get("queryMode") != QUERY_MODE:
        return "client_capability_incompatible"
    if declared.get("profileHash") != PROFILE_HASH:
        return "profile_hash_mismatch"
    if not PROFILES:
        return "no_enabled_profiles"
    return None
