"""The Agent Card: built once from configuration, served with cache validators.

:class:`CardService` owns the ``AgentCard`` proto that a2a-sdk's request handler
also holds, so interfaces learnt after the transport binds (an ephemeral port)
update both. The served document is pre-serialised with its ``ETag``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from email.utils import formatdate
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import MessageToDict

from iac_code import __version__
from iac_code.base.config import ServerConfig
from iac_code.base.jsonio import integral_floats_to_int
from iac_code.base.media_types import MULTIMODAL_MIME_ENV, TEXT_MIME_ENV, env_media_types
from iac_code.base.records import CardDocument, CardExtension, InterfaceInfo

ARTIFACT_METADATA_EXTENSION = "urn:iac-code:a2a:artifact-metadata:v1"
THINKING_EXPOSURE_EXTENSION = "urn:iac-code:a2a:thinking-exposure:v1"
PIPELINE_EVENTS_EXTENSION = "urn:iac-code:a2a:pipeline-events:v1"
PIPELINE_STATE_ENDPOINT = "/iac-code/pipeline/state"
MAX_BATCH_EVENTS = 1024
MAX_BATCH_BYTES = 1024 * 1024
MAX_BATCH_DELAY_MS = 20

DESCRIPTION = "AI-powered Infrastructure as Code assistant for Alibaba Cloud ROS and Terraform workflows."
UNAUTHENTICATED_NOTE = " Unauthenticated A2A server mode is intended for trusted local environments."

BASE_INPUT_MODES = (
    "text/plain", "application/json", "text/markdown", "text/yaml", "application/yaml",
    "application/x-yaml", "image/png", "image/jpeg", "image/webp", "image/gif",
    "audio/mpeg", "audio/wav", "audio/ogg", "application/octet-stream",
)
OUTPUT_MODES = ("text/plain",)

SKILLS: tuple[dict[str, Any], ...] = (
    {"id": "iac_generation", "name": "IaC Generation",
     "description": "Generate Alibaba Cloud ROS and Terraform templates from natural language.",
     "tags": ["iac", "ros", "terraform", "alibaba-cloud"],
     "examples": ["Create a VPC with two vSwitches in cn-hangzhou."]},
    {"id": "iac_review", "name": "IaC Review",
     "description": "Review IaC templates and suggest fixes.",
     "tags": ["iac", "review", "validation"],
     "examples": ["Review this ROS template for missing parameters."]},
    {"id": "aliyun_ros_operations", "name": "Alibaba Cloud ROS Operations",
     "description": "Help with Alibaba Cloud ROS stack workflows.",
     "tags": ["aliyun", "ros", "stack"],
     "examples": ["Check why this ROS stack update failed."]},
    {"id": "terraform_ros_conversion", "name": "Terraform To ROS Conversion",
     "description": "Convert Terraform to ROS with bundled skill resources.",
     "tags": ["terraform", "ros", "conversion"],
     "examples": ["Convert this Terraform VPC module to ROS YAML."]},
)
RUNTIME_DETAILS_SKILL = {
    "id": "iac_code_runtime_details", "name": "iac-code Runtime Details",
    "description": "Authenticated runtime details of this iac-code A2A server.",
    "tags": ["iac-code", "runtime", "a2a"], "examples": ["List my current A2A tasks."],
}


def input_modes() -> list[str]:
    """The advertised input MIME types: the defaults, then sorted configured text and multimodal extras."""
    modes = list(BASE_INPUT_MODES)
    for name in (TEXT_MIME_ENV, MULTIMODAL_MIME_ENV):
        modes.extend(m for m in sorted(env_media_types(name)) if m not in modes)
    return modes


def _skill(spec: dict[str, Any], modes: list[str]) -> AgentSkill:
    return AgentSkill(
        id=spec["id"], name=spec["name"], description=spec.get("description", ""),
        tags=spec.get("tags", []), examples=spec.get("examples", []),
        input_modes=spec.get("input_modes") or modes,
        output_modes=spec.get("output_modes") or list(OUTPUT_MODES),
    )


def _thinking_extension(config: ServerConfig) -> list[AgentExtension]:
    enabled = sorted(config.thinking_types)
    if not enabled:
        return []
    extension = AgentExtension(
        uri=THINKING_EXPOSURE_EXTENSION, required=False,
        description="iac-code metadata for tool traces and raw thinking (metadata.iac_code.tool / .thinking).")
    extension.params.update({"enabledTypes": enabled})
    return [extension]


def _pipeline_extension(config: ServerConfig, interrupts: bool) -> AgentExtension:
    """The pipeline-events extension: pipeline events under ``metadata.iac_code.pipeline``, batched, replayable
    from the state endpoint; ``enabled``/``mode`` say the server's default mode (a request may choose its own);
    ``supportsInterrupts`` whether user text reaches a running pipeline."""
    extension = AgentExtension(uri=PIPELINE_EVENTS_EXTENSION, required=False,
                               description="iac-code pipeline events (metadata.iac_code.pipeline).")
    extension.params.update({
        "schemaVersion": "1.0", "enabled": config.mode == "pipeline", "mode": config.mode,
        "supportsEventBatching": True, "eventBatchMetadataPath": "metadata.iac_code.pipelineBatch.events",
        "maxBatchEvents": MAX_BATCH_EVENTS, "maxBatchBytes": MAX_BATCH_BYTES, "maxBatchDelayMs": MAX_BATCH_DELAY_MS,
        "supportsSnapshot": True, "supportsReplay": True, "supportsInterrupts": interrupts,
        "supportsParallelCandidates": True, "stateEndpoint": PIPELINE_STATE_ENDPOINT,
    })
    return extension


def _plugin_extension(spec: CardExtension) -> AgentExtension:
    extension = AgentExtension(uri=spec.uri, description=spec.description, required=spec.required)
    if spec.params:
        extension.params.update(dict(spec.params))
    return extension


def build_agent_card(config: ServerConfig, interfaces: list[InterfaceInfo], *,
                     push_notifications: bool = False, pipelines: bool = False,
                     interrupts: bool = False, extensions: Sequence[CardExtension] = ()) -> AgentCard:
    """Build the public Agent Card for this configuration (``push_notifications``: the push service is on;
    ``pipelines``: a pipeline plugin is installed; ``interrupts``: its pipelines take interrupts;
    ``extensions``: the plugins' card extensions, served last)."""
    overrides = config.agent_card
    modes = overrides.default_input_modes or input_modes()
    description = overrides.description or (DESCRIPTION + ("" if config.auth_enabled else UNAUTHENTICATED_NOTE))
    skills = (
        [s.model_dump() for s in overrides.skills] if overrides.skills is not None else list(SKILLS)
    )
    card = AgentCard(
        name=overrides.name or "iac-code",
        description=description,
        version=overrides.version or __version__,
        provider=AgentProvider(organization=overrides.organization or "iac-code", url="https://github.com/iac-code"),
        supported_interfaces=[
            AgentInterface(url=i.url, protocol_binding=i.protocol_binding, protocol_version=i.protocol_version)
            for i in interfaces
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=push_notifications,
            extended_agent_card=True,
            extensions=[
                AgentExtension(
                    uri=ARTIFACT_METADATA_EXTENSION,
                    description="Optional iac-code metadata namespace for tool status and stored local artifact metadata.",
                    required=False,
                ),
                *_thinking_extension(config),
                *(
                    AgentExtension(uri=uri, description="Required by this server.", required=True)
                    for uri in config.required_extensions
                ),
                *([_pipeline_extension(config, interrupts)] if pipelines else []),
                *(_plugin_extension(spec) for spec in extensions),
            ],
        ),
        default_input_modes=modes,
        default_output_modes=overrides.default_output_modes or list(OUTPUT_MODES),
        skills=[_skill(s, modes) for s in skills],
    )
    if config.token:
        card.security_schemes["bearerAuth"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")))
        card.security_requirements.append(SecurityRequirement(schemes={"bearerAuth": StringList(list=[""])}))
    if config.basic_username and config.basic_password:
        card.security_schemes["basicAuth"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="basic")))
        card.security_requirements.append(SecurityRequirement(schemes={"basicAuth": StringList(list=[""])}))
    if config.api_key:
        card.security_schemes["apiKeyAuth"].CopyFrom(
            SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(location="header", name=config.api_key_header)))
        card.security_requirements.append(SecurityRequirement(schemes={"apiKeyAuth": StringList(list=[""])}))
    return card


def build_extended_card(public: AgentCard, config: ServerConfig) -> AgentCard:
    """The card for authenticated callers: the public card plus runtime details."""
    extended = AgentCard()
    extended.CopyFrom(public)
    del extended.signatures[:]
    if config.agent_card.skills is None:
        extended.skills.append(_skill(RUNTIME_DETAILS_SKILL, list(public.default_input_modes)))
    return extended


CardSigner = Callable[[AgentCard], AgentCard]
# The plugins' card extensions for the bound interfaces (iac_code_card_extensions).
CardExtensionsHook = Callable[[list[InterfaceInfo]], list[CardExtension]]
# A protocol adapter's card document: (card, config) -> the JSON to serve, or None for the 1.0 card's.
CardDocumentHook = Callable[[AgentCard, ServerConfig], dict[str, Any] | None]


class CardService:
    """Holds the live card protos and their served document.

    With a signer (``card-signer``), the public card and the extended card are each
    signed over their own content; the served document, and so the ``ETag``,
    includes the signature. A signer with a ``current_kid()`` attribute is asked by
    :meth:`refresh` whether its key rotated, and the cards are signed again then.
    """

    def __init__(self, config: ServerConfig, interfaces: list[InterfaceInfo] | None = None, *,
                 push_notifications: bool = False, documents: Sequence[CardDocumentHook] = (),
                 pipelines: bool = False, interrupts: bool = False,
                 extensions: CardExtensionsHook | None = None) -> None:
        self._config = config
        self._pipelines = pipelines
        self._interrupts = interrupts
        self._extensions = extensions
        self._documents = tuple(documents)
        self._push_notifications = push_notifications
        self._started = formatdate(usegmt=True)
        self._interfaces = list(interfaces or [])
        self._signer: CardSigner | None = None
        self._signed_kid = ""
        self.card = build_agent_card(config, self._interfaces, push_notifications=push_notifications,
                                     pipelines=pipelines, interrupts=interrupts,
                                     extensions=self._plugin_extensions())
        self.extended = build_extended_card(self.card, config)
        self.document = self._render()

    def _plugin_extensions(self) -> list[CardExtension]:
        return self._extensions(list(self._interfaces)) if self._extensions is not None else []

    def set_signer(self, signer: CardSigner | None) -> None:
        """Sign the cards with ``signer`` from now on (``None``: unsigned)."""
        self._signer = signer
        self._rebuild()

    def set_interfaces(self, interfaces: list[InterfaceInfo]) -> None:
        """Replace ``supportedInterfaces`` in place (the request handler shares the protos)."""
        self._interfaces = list(interfaces)
        self._rebuild()

    def refresh(self) -> bool:
        """Sign again when the signer's active key changed (a rotation); whether the cards changed."""
        current = getattr(self._signer, "current_kid", None)
        if current is None or current() == self._signed_kid:
            return False
        self._rebuild()
        return True

    def _rebuild(self) -> None:
        fresh = build_agent_card(self._config, self._interfaces, push_notifications=self._push_notifications,
                                 pipelines=self._pipelines, interrupts=self._interrupts,
                                 extensions=self._plugin_extensions())
        extended = build_extended_card(fresh, self._config)
        if self._signer is not None and self._interfaces:  # nothing is served before the transports bind
            current = getattr(self._signer, "current_kid", None)
            self._signed_kid = current() if current is not None else ""
            fresh = self._signer(fresh)
            extended = self._signer(extended)
        self.card.CopyFrom(fresh)
        self.extended.CopyFrom(extended)
        self.document = self._render()

    def as_dict(self) -> dict[str, Any]:
        """The public card as served over HTTP: a protocol adapter's document (e.g. with the 0.3
        discovery fields), else the 1.0 card's JSON."""
        for document in self._documents:
            shaped = document(self.card, self._config)
            if shaped is not None:
                return shaped
        return agent_card_to_dict(self.card)

    def _render(self) -> CardDocument:
        card = self.as_dict() if self.card.supported_interfaces else MessageToDict(self.card)
        # Extension params are a protobuf Struct, whose numbers are doubles: `"maxBatchEvents": 1024`, not
        # `1024.0`, as JSON round-trips elsewhere. JCS canonicalises both alike, so signatures do not change.
        card = integral_floats_to_int(card)
        body = json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        canonical = json.dumps(card, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        etag = f'"sha256-{hashlib.sha256(canonical.encode("utf-8")).hexdigest()}"'
        return CardDocument(body=body, etag=etag, last_modified=self._started)
