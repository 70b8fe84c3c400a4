"""Scoring of the request corpora (``generation_requests*.yaml``): does a request produce exactly what it asks for?

A case passes when the runtime picks the expected skill and, for a generation, the rendered template (parsed back
from its text: YAML, JSON or HCL) has exactly the expected resource kinds with their counts, every stated value in a
resource of its kind, and the reply names exactly what was not generated. The file header of
``generation_requests.yaml`` describes the case format.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hcl2
import yaml
from iac_code_runtime_offline.engine.catalog import RESOURCE_TYPES
from iac_code_runtime_offline.engine.generation import generate
from iac_code_runtime_offline.runtime import choose_skill

HERE = Path(__file__).parent
TUNED = HERE / "generation_requests.yaml"
HELD_OUT = HERE / "generation_requests_heldout.yaml"

# Catalog building block -> the kind a request names it by; its own parts (listeners, rules, ...) share the kind.
KIND_OF_BLOCK: dict[str, str] = {
    "vpc": "vpc", "vswitch": "vswitch", "security_group": "security_group", "security_group_ingress": "security_group",
    "ecs_instance": "ecs", "slb": "slb", "slb_listener": "slb", "slb_backend": "slb", "alb": "alb",
    "alb_server_group": "alb", "alb_listener": "alb", "alb_backend": "alb", "nlb": "nlb", "nlb_server_group": "nlb",
    "nlb_listener": "nlb", "nlb_backend": "nlb", "nat_gateway": "nat", "snat_entry": "nat", "eip": "eip",
    "eip_association": "eip", "rds": "rds", "rds_account": "rds", "redis": "redis", "oss_bucket": "oss",
    "mongodb": "mongodb", "polardb": "polardb", "nas_file_system": "nas", "nas_mount_target": "nas",
    "ram_role": "ram_role", "ram_policy": "ram_role", "fc_service": "fc", "fc_function": "fc", "fc_trigger": "fc",
    "ack_cluster": "ack", "ack_node_pool": "ack", "ess_scaling_group": "ess", "ess_scaling_configuration": "ess",
    "ess_enable": "ess", "kms_key": "kms", "dns_record": "dns", "sls_project": "sls", "sls_logstore": "sls",
}
# The block whose resources are counted for a kind.
COUNTED_BLOCK: dict[str, str] = {
    "vpc": "vpc", "vswitch": "vswitch", "security_group": "security_group", "ecs": "ecs_instance", "slb": "slb",
    "alb": "alb", "nlb": "nlb", "nat": "nat_gateway", "eip": "eip", "rds": "rds", "redis": "redis", "oss": "oss_bucket",
    "mongodb": "mongodb", "polardb": "polardb", "nas": "nas_file_system", "ram_role": "ram_role", "fc": "fc_function",
    "ack": "ack_cluster", "ess": "ess_scaling_group", "kms": "kms_key", "dns": "dns_record", "sls": "sls_project",
}
KINDS = frozenset(COUNTED_BLOCK)
NETWORKED = frozenset({"vpc", "vswitch", "security_group", "ecs", "slb", "alb", "nlb", "nat", "rds", "redis", "mongodb",
                       "polardb", "nas", "ack", "ess"})
_BLOCK_OF_TYPE = {ros: block for block, (ros, _) in RESOURCE_TYPES.items()} | {
    tf: block for block, (_, tf) in RESOURCE_TYPES.items() if tf} | {
    "alicloud_ram_role_policy_attachment": "ram_policy"}  # Terraform attaches the role's policy with a resource of its own
SKILL_OF_INTENT = {"generate": "iac_generation", "review": "iac_review", "convert": "terraform_ros_conversion",
                   "ops": "aliyun_ros_operations", "question": None, "chat": None}


@dataclass
class Outcome:
    """One case's verdict: the problems found (none when it passed) and how long the engine took."""

    case: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def fmt(self) -> str:
        """"ros", "terraform" or "none" (not a generation): the column of the tables."""
        fmt = self.case.get("format")
        return "none" if fmt is None else "terraform" if fmt == "terraform" else "ros"


def load(path: Path) -> list[dict[str, Any]]:
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(cases, list)
    return cases


def implied(kinds: set[str]) -> set[str]:
    """What the listed kinds need and may therefore bring without being asked: their network, rules, NAT's EIP."""
    extra: set[str] = set()
    if kinds & NETWORKED:
        extra |= {"vpc", "vswitch"}
    if kinds & {"ecs", "ess", "ack"}:
        extra.add("security_group")
    if "nat" in kinds:
        extra.add("eip")
    return extra


def _unquote(value: Any) -> Any:
    """python-hcl2 keeps the quotes of strings and labels; strip them."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(item) for item in value]
    if isinstance(value, dict):
        return {_unquote(key): _unquote(item) for key, item in value.items()}
    return value


@dataclass
class Rendered:
    """A template parsed back from its text: (catalog block, body, count) per resource, and parameter defaults."""

    resources: list[tuple[str, dict[str, Any], int]]
    defaults: dict[str, Any]
    unknown_types: list[str]


def parse_back(text: str, fmt: str) -> Rendered:
    resources: list[tuple[str, dict[str, Any], int]] = []
    unknown: list[str] = []
    defaults: dict[str, Any] = {}
    if fmt == "terraform":
        parsed = _unquote(hcl2.loads(text))
        for group in parsed.get("variable", []):
            for name, body in group.items():
                if "default" in body:
                    defaults[name] = body["default"]
        bodies = [(kind, body) for group in parsed.get("resource", []) for kind, named in group.items()
                  for body in named.values()]
        for kind, body in bodies:
            count = body.get("count", 1)
            _add(resources, unknown, kind, body, count if isinstance(count, int) else 1)
        return Rendered(resources, defaults, unknown)
    template = json.loads(text) if fmt == "ros-json" else yaml.safe_load(text)
    for name, parameter in (template.get("Parameters") or {}).items():
        if isinstance(parameter, dict) and "Default" in parameter:
            defaults[name] = parameter["Default"]
    for resource in (template.get("Resources") or {}).values():
        count = resource.get("Count", 1)
        _add(resources, unknown, resource["Type"], resource.get("Properties") or {}, count if isinstance(count, int) else 1)
    return Rendered(resources, defaults, unknown)


def kind_of(block: str) -> str | None:
    """The kind of a catalog block; a part added to the catalog later ("redis_whitelist") belongs to its prefix's kind."""
    return KIND_OF_BLOCK.get(block) or next((kind for kind in sorted(KINDS, key=len, reverse=True)
                                             if block.startswith(kind + "_")), None)


def _add(resources: list[tuple[str, dict[str, Any], int]], unknown: list[str], kind: str, body: dict[str, Any],
         count: int) -> None:
    block = _BLOCK_OF_TYPE.get(kind)
    if block is None or kind_of(block) is None:
        unknown.append(kind)
    else:
        resources.append((block, body, count))


def leaves(node: Any, defaults: dict[str, Any]) -> Iterator[Any]:
    """Every scalar under ``node``; a reference to a parameter or variable yields its default as well."""
    if isinstance(node, dict):
        if set(node) == {"Ref"} and node["Ref"] in defaults:
            yield from leaves(defaults[node["Ref"]], defaults)
            return
        for value in node.values():
            yield from leaves(value, defaults)
    elif isinstance(node, list):
        for value in node:
            yield from leaves(value, defaults)
    else:
        if isinstance(node, str):
            for name in re.findall(r"\$\{var\.([A-Za-z0-9_-]+)\}", node):
                if name in defaults:
                    yield from leaves(defaults[name], defaults)
        yield node


def matches(value: Any, leaf: Any) -> bool:
    """Whether a stated value is this leaf, or a whole token of it ("3389" in "3389/3389", "ubuntu" in an image id)."""
    if isinstance(leaf, bool) or isinstance(value, bool):
        return str(value).lower() == str(leaf).lower()
    if isinstance(value, int) and isinstance(leaf, int | float):
        return leaf == value
    return re.search(rf"(?<![A-Za-z0-9.]){re.escape(str(value))}(?![A-Za-z0-9]|\.\d)", str(leaf), re.IGNORECASE) is not None


def turn(prompt: str, previous: dict[str, Any] | None) -> SimpleNamespace:
    """The parts of a runtime turn that choosing a skill reads."""
    return SimpleNamespace(prompt=prompt, metadata={}, session={"generation": previous} if previous else {})


def score(case: dict[str, Any]) -> Outcome:
    """Run one case through the engine the way the offline runtime does, and list what is wrong."""
    import time

    outcome = Outcome(case)
    problems = outcome.problems
    started = time.perf_counter()
    previous = None
    if "context" in case:
        try:
            first = generate(case["context"])
        except Exception as error:
            problems.append(f"context: crash: {type(error).__name__}: {error}")
            return outcome
        if choose_skill(turn(case["context"], None)) != "iac_generation" or not first.resources:  # type: ignore[arg-type]
            problems.append("context: not generated")
            return outcome
        previous = first.spec
    intent = case.get("intent", "generate")
    skill = choose_skill(turn(case["prompt"], previous))  # type: ignore[arg-type]
    if skill != SKILL_OF_INTENT[intent]:
        problems.append(f"intent: {skill} instead of {SKILL_OF_INTENT[intent]}")
        outcome.seconds = time.perf_counter() - started
        return outcome
    if intent != "generate":
        outcome.seconds = time.perf_counter() - started
        return outcome
    try:
        result = generate(case["prompt"], previous)
    except Exception as error:  # a crash is a failed case, not the end of the evaluation
        problems.append(f"crash: {type(error).__name__}: {error}")
        return outcome
    outcome.seconds = time.perf_counter() - started
    if result.format != case["format"]:
        problems.append(f"format: {result.format} instead of {case['format']}")
    rendered = parse_back(result.text, result.format)
    problems += [f"unknown resource type {kind}" for kind in rendered.unknown_types]
    counts: Counter[str] = Counter()
    present: set[str] = set()
    for block, _, count in rendered.resources:
        kind = kind_of(block)
        assert kind is not None
        present.add(kind)
        if COUNTED_BLOCK[kind] == block:
            counts[kind] += count
    expected: dict[str, int] = case["expect"]
    for kind, count in expected.items():
        if counts[kind] != count:
            problems.append(f"{kind}: {counts[kind]} instead of {count}")
    allowed = set(expected) | implied(set(expected))
    for kind in sorted(present - allowed):
        problems.append(f"{kind}: not asked for ({counts[kind]})")
    for kind in case.get("absent", []):
        if kind in present and kind in allowed:  # not already reported as not asked for
            problems.append(f"{kind}: mentioned only as principal/target/source, yet created")
    _check_values(case, result, rendered, problems)
    _check_reported(case, list(result.unmapped), problems)
    return outcome


def _check_values(case: dict[str, Any], result: Any, rendered: Rendered, problems: list[str]) -> None:
    for kind, values in (case.get("values") or {}).items():
        if kind == "any":
            haystack = [result.text, result.summary]
        else:
            haystack = [leaf for block, body, _ in rendered.resources if kind_of(block) == kind
                        for leaf in leaves(body, rendered.defaults)]
        for value in values:
            if not any(matches(value, leaf) for leaf in haystack):
                problems.append(f"value {value!r} not in {kind}")


def _check_reported(case: dict[str, Any], unmapped: list[str], problems: list[str]) -> None:
    wanted = [str(item).lower() for item in case.get("reported", [])]
    for item in wanted:
        if not any(item in entry.lower() for entry in unmapped):
            problems.append(f"not reported: {item}")
    for entry in unmapped:
        if not any(item in entry.lower() for item in wanted):
            problems.append(f"reported without cause: {entry}")


def language(case: dict[str, Any]) -> str:
    return str(case["lang"])


def table(outcomes: list[Outcome], title: str) -> str:
    """A pass-rate table: rows by language, columns by format (ROS, Terraform, not a generation), with totals."""
    columns = [("ros", "ROS"), ("terraform", "Terraform"), ("none", "not generation"), (None, "all")]
    rows = [("en", "English"), ("zh", "Chinese"), ("mixed", "mixed"), (None, "all")]

    def cell(lang: str | None, fmt: str | None) -> str:
        chosen = [o for o in outcomes if (lang is None or language(o.case) == lang) and (fmt is None or o.fmt == fmt)]
        if not chosen:
            return "-"
        passed = sum(o.passed for o in chosen)
        return f"{passed}/{len(chosen)} ({100 * passed / len(chosen):.1f}%)"

    width = 20
    lines = [title, "| language | " + " | ".join(name for _, name in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for lang, name in rows:
        lines.append(f"| {name} | " + " | ".join(cell(lang, fmt).ljust(width - 6) for fmt, _ in columns) + " |")
    return "\n".join(lines)


def pass_rate(outcomes: list[Outcome]) -> float:
    return sum(o.passed for o in outcomes) / len(outcomes)
