"""The ``offline`` IaC engine (``iac_code_iac_engines``): the offline runtime's engine behind the kernel's
:class:`~iac_code.api.IacEngine` interface, so pipelines understand requests, write and review templates
without importing this plugin.

It calls exactly what the ``offline`` runtime calls: ``intent.classify`` for what a request is,
``generation.generate`` for the template (ROS YAML unless Terraform is asked for), ``review.review`` for
findings. Two readings the runtime does not need are added here, both plain word lists: which other cloud a
request is about (AWS, Azure, GCP) and whether an infrastructure request names nothing the catalog has
("deploy my app"). Everything is deterministic and local: no network, no credentials.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from iac_code.api import Finding, GeneratedTemplate, IacEngineSpec, Understanding, hookimpl
from iac_code_runtime_offline.tools import MEDIA_TYPES

if TYPE_CHECKING:
    from iac_code.api import PluginContext

# The reviewer's severities (review.RULES) on the interface's scale.
SEVERITIES = {"error": "high", "warning": "medium", "info": "info"}
# The runtime's skills (intent.classify) as Understanding categories.
CATEGORIES = {"iac_generation": "generation", "iac_review": "review", "terraform_ros_conversion": "conversion",
              "aliyun_ros_operations": "stack_operation"}

# Another provider named by its name or by products only it has. "S3" and "EC2" alone are enough: nobody
# asks Alibaba Cloud for an "EC2 instance".
_OTHER_CLOUDS = (
    ("aws", r"\baws\b|amazon web services|\bamazon\s+(?:ec2|s3|rds|vpc|eks|lambda|cloud)|\bec2\b|\bs3\b(?!\s*协议)"
            r"|\beks\b|\blambda\s+functions?\b|\baws lambda\b|\bcloudformation\b|\bdynamo ?db\b|\broute ?53\b|亚马逊云"),
    ("azure", r"\bazure\b|\bmicrosoft cloud\b|\baks\b|\bcosmos ?db\b|\bblob storage\b|微软云"),
    ("gcp", r"\bgcp\b|google cloud|\bgce\b|\bgke\b|\bcompute engine\b|\bcloud run\b|\bbigquery\b|谷歌云"),
)
# An infrastructure request that names nothing from the catalog: something to deploy, host or build.
_THING = (r"(?:apps?|applications?|web ?apps?|websites?|web ?sites?|sites?|backends?|back-ends?|apis?|services?"
          r"|microservices?|infrastructure|infra|environments?|platforms?|systems?|stacks?|shops?|stores?|blogs?"
          r"|projects?|workloads?|game servers?|saas)")
_VAGUE_INFRA = (
    rf"\b(?:deploy|host|launch|run|ship|set ?up|build|provision|spin up|stand up|migrate|move|need|want|create|make)\b"
    rf"[^.?!]{{0,40}}?\b{_THING}\b"
    r"|\b(?:on|to|in)\s+(?:alibaba ?cloud|aliyun)\b"
    r"|(?:部署|搭建|上线|托管|迁移|需要|想要|建|做|跑)[^。？！?!]{0,20}?"
    r"(?:应用|网站|站点|后端|服务|系统|环境|平台|架构|商城|博客|小程序|基础设施|项目|业务)"
    r"|(?:上|到)\s*阿里云"
)
_CJK = re.compile(r"[\u4e00-\u9fff]")

_TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "generation": "Infrastructure request: a template", "edit": "Infrastructure request: a change to a template",
        "review": "Infrastructure request: a template review", "conversion": "Infrastructure request: Terraform to ROS",
        "stack_operation": "Infrastructure request: ROS stack operations", "question": "A question, not a request",
        "chat": "Conversation, not an infrastructure request", "with": " with {items}", "region": " in {region}",
        "other": " (about {cloud}; the template would use the Alibaba Cloud equivalents)",
        "vague": " (no specific resources named)", "unmapped": "; not mapped: {items}", "end": ".",
    },
    "zh": {
        "generation": "基础设施请求：生成模板", "edit": "基础设施请求：修改模板", "review": "基础设施请求：审查模板",
        "conversion": "基础设施请求：Terraform 转 ROS", "stack_operation": "基础设施请求：ROS 资源栈操作",
        "question": "提问，不是资源请求", "chat": "对话，不是基础设施请求", "with": "，包含 {items}",
        "region": "，地域 {region}", "other": "（针对 {cloud}，模板将使用阿里云的对应产品）",
        "vague": "（未指明具体资源）", "unmapped": "；无法映射：{items}", "end": "。",
    },
}
_CLOUD_NAMES = {"aws": "AWS", "azure": "Azure", "gcp": "Google Cloud"}


def other_cloud(prompt: str) -> str:
    """The other provider (``aws``, ``azure``, ``gcp``) a request is about, or ``""``."""
    for name, pattern in _OTHER_CLOUDS:
        if re.search(pattern, prompt, re.IGNORECASE):
            return name
    return ""


def summary_language(prompt: str, language: str) -> str:
    """``zh`` for a Chinese request (or a Chinese caller), else ``en``: the summary's language."""
    return "zh" if _CJK.search(prompt) or language.lower().startswith("zh") else "en"


def count_types(template: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """``{"type", "count"}`` per resource type of a ROS template, in the template's order."""
    resources = (template or {}).get("Resources") or {}
    counts = Counter(body.get("Type") for body in resources.values() if isinstance(body, Mapping))
    return tuple({"type": kind, "count": count} for kind, count in counts.items() if isinstance(kind, str))


def ros_resources(template: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """``{"name", "type", "properties"}`` for each resource of a ROS template."""
    resources = (template or {}).get("Resources") or {}
    return tuple({"name": name, "type": body.get("Type", ""), "properties": dict(body.get("Properties") or {})}
                 for name, body in resources.items() if isinstance(body, Mapping))


def terraform_resources(text: str) -> tuple[dict[str, Any], ...]:
    """``{"name", "type", "properties"}`` for each ``resource`` block of Terraform text (read as the converter reads it)."""
    import hcl2

    from iac_code_runtime_offline.engine.terraform_to_ros import _blocks, _body, _label, _unescape

    def plain(value: Any) -> Any:  # python-hcl2 keeps string literals quoted: '"iac-code-vpc"'
        if isinstance(value, str):
            return _unescape(_label(value)) if _label(value) != value else value
        if isinstance(value, list):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items() if not key.startswith("__")}
        return value

    found: list[dict[str, Any]] = []
    for block in _blocks(hcl2.loads(text), "resource"):
        for raw_type, named in block.items():
            if raw_type.startswith("__") or not isinstance(named, dict):
                continue
            for raw_name, body in named.items():
                if not raw_name.startswith("__") and isinstance(body, dict):
                    found.append({"name": _label(raw_name), "type": _label(raw_type), "properties": plain(_body(body))})
    return tuple(found)


def finding_resource(location: str) -> str:
    """The resource a reviewer location points into: ``Resources.Web.Properties.X`` → ``Web``,
    ``alicloud_instance.web.tags`` → ``alicloud_instance.web``; ``""`` for parameters, providers and the like."""
    parts = [re.sub(r"\[\d+\]$", "", part) for part in location.split(".")]
    if parts[0] == "Resources" and len(parts) > 1:
        return parts[1]
    if len(parts) > 1 and re.fullmatch(r"[a-z][a-z0-9]*_[a-z0-9_]+", parts[0]):
        return f"{parts[0]}.{parts[1]}"
    return ""


class OfflineIacEngine:
    """The offline engine as an :class:`~iac_code.api.IacEngine`: stateless, synchronous, deterministic."""

    name = "offline"

    def understand(self, prompt: str, language: str = "en") -> Understanding:
        """What ``prompt`` asks for, read as the offline runtime reads it (``intent.classify``)."""
        from iac_code_runtime_offline.engine.generation import generate, render
        from iac_code_runtime_offline.engine.intent import _RELATIVE_ONLY, classify, is_chat, is_question
        from iac_code_runtime_offline.engine.request_parsing import normalize, parse_request, region_of

        text = normalize(prompt)
        skill = classify(prompt)
        cloud = other_cloud(text)
        region = region_of(text) or ""
        resources: tuple[dict[str, Any], ...] = ()
        unmapped: list[str] = []
        vague = False
        if skill is not None:
            category = CATEGORIES[skill]
            confidence = "high"
        elif is_question(text):
            category, confidence = "question", "low"
        elif is_chat(text):
            category, confidence = "chat", "low"
        elif parse_request(prompt)["remove"] or re.search(_RELATIVE_ONLY, text, re.IGNORECASE):
            category, confidence = "edit", "medium"  # a change, with no template in this request to change
        elif re.search(_VAGUE_INFRA, text, re.IGNORECASE):
            category, confidence, vague = "generation", "medium", True
        else:
            category, confidence = "chat", "low"
        if category == "generation" and not vague:
            result = generate(prompt)
            _, template = render({**result.spec, "format": "ros-yaml"})  # kinds and counts as ROS types
            resources = count_types(template) if result.resources else ()
            unmapped = list(result.unmapped)
            if not resources:
                confidence = "medium"  # infrastructure, but nothing the catalog has
        infra = category not in ("question", "chat")
        return Understanding(is_infra_intent=infra, category=category, confidence=confidence, resources=resources,
                             summary=self._summary(prompt, language, category, resources, region, cloud, vague, unmapped),
                             other_cloud=cloud, region=region)

    def generate(self, prompt: str, language: str = "en") -> GeneratedTemplate:
        """The template the offline runtime writes for ``prompt`` (``generation.generate``), with its resources."""
        from iac_code_runtime_offline.engine.generation import generate

        result = generate(prompt)
        media_type = MEDIA_TYPES.get("." + result.file_name.rsplit(".", 1)[-1], "text/plain")
        if not result.resources:  # the runtime writes nothing and names what it could not map
            return GeneratedTemplate(text="", filename=result.file_name, media_type=media_type,
                                     not_generated=tuple(result.unmapped) or (prompt[:200],))
        if result.template is not None:
            resources = ros_resources(result.template)
            parameters = dict(result.template.get("Parameters") or {})
        else:
            resources, parameters = terraform_resources(result.text), {}
        return GeneratedTemplate(text=result.text, filename=result.file_name, media_type=media_type, resources=resources,
                                 not_generated=tuple(result.unmapped), parameters=parameters)

    def review(self, template: str, language: str = "en") -> Sequence[Finding]:
        """The reviewer's findings (``review.review``), most severe first; the rule texts are English."""
        from iac_code_runtime_offline.engine.review import review

        report = review(template)
        return [Finding(severity=SEVERITIES.get(f.severity, "info"), rule=f.rule_id, message=f.message,
                        resource=finding_resource(f.location)) for f in report.findings]

    @staticmethod
    def _summary(prompt: str, language: str, category: str, resources: Sequence[Mapping[str, Any]], region: str,
                 cloud: str, vague: bool, unmapped: Sequence[str]) -> str:
        texts = _TEXTS[summary_language(prompt, language)]
        line = texts[category]
        if resources:
            line += texts["with"].format(items=", ".join(f"{r['count']}× {r['type']}" for r in resources))
        if vague:
            line += texts["vague"]
        if region:
            line += texts["region"].format(region=region)
        if cloud:
            line += texts["other"].format(cloud=_CLOUD_NAMES[cloud])
        if unmapped:
            line += texts["unmapped"].format(items=", ".join(unmapped))
        return line + texts["end"]


@hookimpl
def iac_code_iac_engines() -> list[IacEngineSpec]:
    def create(context: PluginContext) -> OfflineIacEngine:
        return OfflineIacEngine()

    return [IacEngineSpec(name="offline", create=create,
                          description="The offline engine: requests read, ROS/Terraform written and reviewed locally.")]
