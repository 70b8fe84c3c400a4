"""The IaC engine interface: understand a request, write a template, review one.

An engine plugin (``iac_code_iac_engines``) provides it, so features such as the
selling pipelines produce templates, reviews and resource lists without depending
on a particular runtime plugin. Nothing here imports a2a-sdk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Understanding:
    """What a request asks for, as the engine reads it.

    ``category`` is ``generation``, ``edit``, ``review``, ``conversion``, ``question``,
    ``stack_operation`` or ``chat``; ``confidence`` is ``high``, ``medium`` or ``low``;
    ``resources`` lists the resource kinds asked for (``{"type": "ALIYUN::ECS::Instance",
    "count": 2}``); ``other_cloud`` names another provider the request is about
    (``aws``, ``azure``, ``gcp``), empty for Alibaba Cloud or none named.
    """

    is_infra_intent: bool
    category: str
    confidence: str
    resources: tuple[Mapping[str, Any], ...] = ()
    summary: str = ""
    other_cloud: str = ""
    region: str = ""


@dataclass(frozen=True)
class GeneratedTemplate:
    """A template the engine wrote: its text, file name and media type, and its resources
    (``{"name", "type", "properties"}``); ``not_generated`` names what was asked for but not written."""

    text: str
    filename: str
    media_type: str
    resources: tuple[Mapping[str, Any], ...] = ()
    not_generated: tuple[str, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    """One review finding: ``severity`` is ``high``, ``medium``, ``low`` or ``info``."""

    severity: str
    rule: str
    message: str
    resource: str = ""


class IacEngine(Protocol):
    """Understands, writes and reviews Alibaba Cloud templates (ROS by default).

    The methods are synchronous and CPU-bound; callers on an event loop run them in a thread.
    """

    name: str

    def understand(self, prompt: str, language: str = "en") -> Understanding:
        """Read what ``prompt`` asks for."""
        ...

    def generate(self, prompt: str, language: str = "en") -> GeneratedTemplate:
        """Write the template ``prompt`` asks for (a ROS template unless it asks for Terraform)."""
        ...

    def review(self, template: str, language: str = "en") -> Sequence[Finding]:
        """Review a template's text (ROS YAML/JSON or Terraform)."""
        ...


@runtime_checkable
class TemplateFixer(Protocol):
    """An :class:`IacEngine` that can also fix what its review found (optional): a reviewing step calls it while
    high-severity findings remain, a few rounds at most, and reports the findings as they are without it."""

    def fix(self, template: str, findings: Sequence[Finding], language: str = "en") -> GeneratedTemplate | None:
        """``template`` with ``findings`` fixed (its resources listed again), or ``None`` when it cannot fix them."""
        ...
