"""The Agent Card as A2A 0.3 clients read it: a 0.3 twin of each interface this plugin serves.

The 1.0 card lists 1.0 interfaces only. With ``card-legacy-fields: true`` the HTTP card
document also carries the 0.3 discovery fields (``url``, ``preferredTransport``,
``protocolVersion``, ``additionalInterfaces``, ...), as a2a-sdk's card route serves them for
a card with 0.3 interfaces; the extended card a 0.3 client asks for always lists the twins.
"""

from __future__ import annotations

from typing import Any

from a2a.compat.v0_3.versions import is_legacy_version
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCard, AgentInterface
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from google.protobuf.json_format import MessageToDict

# The bindings this plugin also serves as 0.3 (JSON-RPC by method name, HTTP+JSON under /v1).
LEGACY_BINDINGS = frozenset({"JSONRPC", "HTTP+JSON"})


def legacy_interfaces(card: AgentCard) -> list[AgentInterface]:
    """The 0.3 interfaces this server serves: a 0.3 twin of each 1.0 JSON-RPC and HTTP+JSON interface.

    The same endpoints answer 0.3 clients (0.3 method names on ``POST /``, the
    ``/v1/...`` routes under the HTTP+JSON URL); gRPC does not.
    """
    return [AgentInterface(url=i.url, protocol_binding=i.protocol_binding, protocol_version=PROTOCOL_VERSION_0_3)
            for i in card.supported_interfaces
            if i.protocol_binding in LEGACY_BINDINGS and not is_legacy_version(i.protocol_version)]


def card_document(card: AgentCard, config: Any) -> dict[str, Any] | None:
    """The card's JSON as served over HTTP with the legacy 0.3 fields (``card-legacy-fields``), else ``None``.

    ``supportedInterfaces`` stays the 1.0 list. a2a-sdk's ``agent_card_to_dict`` derives
    the legacy fields (``url``, ``preferredTransport``, ``protocolVersion``,
    ``additionalInterfaces``, ``security``, ...) from the 0.3 interfaces the card
    lists, so it is given the card with :func:`legacy_interfaces` in their place.
    1.0 readers (a2a-sdk's card parser, the signature check) ignore the legacy fields.
    """
    if not getattr(config, "card_legacy_fields", False):
        return None
    twins = legacy_interfaces(card)
    if not twins:
        return agent_card_to_dict(card)
    legacy = AgentCard()
    legacy.CopyFrom(card)
    del legacy.supported_interfaces[:]
    legacy.supported_interfaces.extend(twins)
    document = agent_card_to_dict(legacy)
    document["supportedInterfaces"] = MessageToDict(card)["supportedInterfaces"]
    return document


def with_legacy_interfaces(card: AgentCard) -> AgentCard:
    """``card`` with a 0.3 twin of each JSON-RPC and HTTP+JSON interface (the 0.3 card names them).

    The 1.0 card lists 1.0 interfaces only; the same endpoints serve 0.3
    (``POST /``, ``/v1/...``), which the SDK's 0.3 card conversion needs to see.
    """
    interfaces = card.supported_interfaces
    if any(not i.protocol_version or is_legacy_version(i.protocol_version) for i in interfaces):
        return card
    interfaces.extend(legacy_interfaces(card))
    return card
