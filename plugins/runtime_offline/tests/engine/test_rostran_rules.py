"""The engine's templates against Alibaba Cloud's own resource rules (alibabacloud-ros-tran's rule files).

Every prompt of every generation corpus is generated and rendered in both ROS and Terraform; every
property of every resource must exist on its type according to the rules. Where the rules themselves
have a gap, the gap is listed below with the reason, and a test keeps each entry honest: an entry the
rules no longer need is an error, so the lists only shrink.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml
from iac_code_runtime_offline.engine import rostran_rules
from iac_code_runtime_offline.engine.generation import generate, render
from iac_code_runtime_offline.engine.ros_schema import RESOURCE_SCHEMAS
from iac_code_runtime_offline.engine.rostran_rules import PropertyRule, ros_rule, terraform_rule

HERE = Path(__file__).parent

# ROS types the engine generates that rostran describes no rule for (its ROS rules cover the types that have a
# Terraform twin). Each is documented in the ROS resource type reference.
ROS_TYPES_WITHOUT_RULES = {
    "ALIYUN::ALB::BackendServerAttachment": "no Terraform twin (Terraform attaches one server per resource)",
    "ALIYUN::NLB::BackendServerAttachment": "no Terraform twin (Terraform attaches one server per resource)",
    "ALIYUN::ESS::ScalingGroupEnable": "no Terraform twin (Terraform activates with the configuration's `active`)",
    "ALIYUN::REDIS::Whitelist": "no Terraform twin (Terraform sets the instance's `security_ips`)",
}
# Terraform types the engine generates whose rule rostran lacks or names wrongly.
TERRAFORM_TYPES_WITHOUT_RULES = {
    "alicloud_nlb_server_group_server_attachment": "the rule file of that name describes alicloud_nlb_server_group_"
                                                   "attachment (a slip in rostran's data)",
}
# Arguments the alicloud provider documents (website/docs/r/kvstore_instance.html.markdown) but rostran's
# kvstore_instance rule does not list.
TERRAFORM_ARGUMENTS_MISSING_FROM_RULES = {
    ("alicloud_kvstore_instance", "engine_version"),
    ("alicloud_kvstore_instance", "password"),
    ("alicloud_kvstore_instance", "security_ips"),
}
_META = frozenset({"depends_on", "count", "for_each", "lifecycle", "provider"})


def _cases(path: Path) -> list[Any]:
    """The cases of a corpus file: a YAML list, or the lists under the keys of a YAML mapping."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return [case for value in data.values() if isinstance(value, list) for case in value]
    return data if isinstance(data, list) else []


def _corpus_files() -> list[Path]:
    """Every generation corpus under tests/engine: a YAML file named ``*corpus*`` or ``generation_requests*``
    (the request corpora, held-out third included) holding cases with a "prompt"."""
    files = {*HERE.rglob("*corpus*.y*ml"), *HERE.rglob("generation_requests*.y*ml")}
    return [path for path in sorted(files)
            if any(isinstance(case, dict) and isinstance(case.get("prompt"), str) for case in _cases(path))]


def _prompts() -> Iterator[tuple[str, list[str]]]:
    """(id, prompts of one conversation): "previous" prompts, when a case has them, come first."""
    for path in _corpus_files():
        for index, case in enumerate(_cases(path)):
            if not (isinstance(case, dict) and isinstance(case.get("prompt"), str)):
                continue
            previous = case.get("previous") or []
            chain = ([previous] if isinstance(previous, str) else [p for p in previous if isinstance(p, str)])
            yield f"{path.name}:{index}", chain + [case["prompt"]]


CASES = list(_prompts())


def _unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(item) for item in value]
    if isinstance(value, dict):
        return {_unquote(key): _unquote(item) for key, item in value.items()}
    return value


def _nested_problems(kind: str, schema: Mapping[str, PropertyRule], body: Mapping[str, Any], path: str) -> list[str]:
    """Fields of a nested block the rules' schema for it does not have."""
    problems = []
    for name, value in body.items():
        if name.startswith("__"):
            continue
        rule = schema.get(name)
        if rule is None:
            problems.append(f"{kind}: {path}.{name} is not a field of {path}")
        elif rule.schema:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    problems += _nested_problems(kind, rule.schema, item, f"{path}.{name}")
    return problems


def ros_problems(template: Mapping[str, Any]) -> list[str]:
    """Properties of a ROS template that do not exist on their type according to the rules."""
    problems = []
    for name, resource in template["Resources"].items():
        rule = ros_rule(resource["Type"])
        if rule is None:
            if resource["Type"] not in ROS_TYPES_WITHOUT_RULES:
                problems.append(f"{name}: the rules do not know {resource['Type']}")
            continue
        problems += [f"{name}: {resource['Type']} has no property {prop}"
                     for prop in resource.get("Properties", {}) if prop not in rule.properties]
    return problems


def terraform_problems(text: str) -> list[str]:
    """Arguments (and nested block fields) of Terraform resources that their type does not have according to the rules."""
    problems = []
    parsed = _unquote(hcl2.loads(text))
    for group in parsed.get("resource", []):
        for kind, named in group.items():
            rule = terraform_rule(kind)
            for body in named.values():
                if rule is None:
                    if kind not in TERRAFORM_TYPES_WITHOUT_RULES:
                        problems.append(f"the rules do not know {kind}")
                    continue
                for argument, value in body.items():
                    if argument.startswith("__") or argument in _META:
                        continue
                    if argument not in rule.properties:
                        if (kind, argument) not in TERRAFORM_ARGUMENTS_MISSING_FROM_RULES:
                            problems.append(f"{kind} has no argument {argument}")
                        continue
                    for item in value if isinstance(value, list) else [value]:
                        if rule.properties[argument].schema and isinstance(item, dict):
                            problems += _nested_problems(kind, rule.properties[argument].schema, item, argument)
    return problems


def test_the_rules_are_there_and_load_once() -> None:
    assert len(rostran_rules.terraform_types()) >= 800 and len(rostran_rules.ros_types()) >= 650
    vpc = terraform_rule("alicloud_vpc")
    assert vpc is not None and vpc.ros_type == "ALIYUN::ECS::VPC"
    assert vpc.properties["cidr_block"].to == "CidrBlock" and not vpc.properties["is_default"].mapped
    assert vpc.attributes["route_table_id"].to == "RouteTableId"
    instance = terraform_rule("alicloud_instance")
    assert instance is not None and instance.properties["data_disks"].schema["size"].to == "Size"
    ros_vpc = ros_rule("ALIYUN::ECS::VPC")
    assert ros_vpc is not None and "CidrBlock" in ros_vpc.properties and "VpcId" in ros_vpc.attributes
    assert "PrivateIpAddress" in (ros_rule("ALIYUN::ECS::Instance") or pytest.fail()).properties  # "X$$0" folded
    assert terraform_rule("alicloud_no_such_thing") is None and ros_rule("ALIYUN::No::Such") is None
    assert terraform_rule("alicloud_vpc") is vpc  # parsed once, then cached
    assert rostran_rules.terraform_rule.cache_info().maxsize == rostran_rules.CACHE_SIZE
    assert rostran_rules.rules_version() != "unknown"


def test_there_are_corpora_to_check() -> None:
    names = {path.name for path in _corpus_files()}
    assert {"generation_corpus.yaml", "generation_requests.yaml", "generation_requests_heldout.yaml"} <= names
    assert len(CASES) >= 600


@pytest.mark.parametrize(("case", "prompts"), CASES, ids=[case for case, _ in CASES])
def test_generated_templates_use_only_real_properties(case: str, prompts: list[str]) -> None:
    spec = None
    for prompt in prompts:
        spec = generate(prompt, spec).spec
    assert spec is not None
    for fmt in ("ros-yaml", "terraform"):
        text, template = render({**copy.deepcopy(spec), "format": fmt})
        problems = ros_problems(template) if template is not None else terraform_problems(text)
        assert problems == [], f"{fmt}: {problems}"


def test_the_checks_catch_a_wrong_property() -> None:
    result = generate("Create a VPC with an SLB and a Redis instance")
    assert result.template is not None and ros_problems(result.template) == []
    broken = copy.deepcopy(result.template)
    broken["Resources"]["LoadBalancer"]["Properties"]["PayType"] = "PayOnDemand"
    broken["Resources"]["Vpc"]["Type"] = "ALIYUN::ECS::NoSuchThing"
    assert ros_problems(broken) == ["Vpc: the rules do not know ALIYUN::ECS::NoSuchThing",
                                    "LoadBalancer: ALIYUN::SLB::LoadBalancer has no property PayType"]
    terraform = 'resource "alicloud_vpc" "v" {\n  cidr = "10.0.0.0/8"\n}\nresource "alicloud_instance" "i" {\n' \
                '  data_disks {\n    sizes = 20\n  }\n}\n'
    assert terraform_problems(terraform) == ["alicloud_vpc has no argument cidr",
                                             "alicloud_instance: data_disks.sizes is not a field of data_disks"]


def test_the_allowances_are_still_needed() -> None:
    for ros_type in ROS_TYPES_WITHOUT_RULES:
        assert ros_rule(ros_type) is None, f"rostran now describes {ros_type}: check it and drop the allowance"
    for kind in TERRAFORM_TYPES_WITHOUT_RULES:
        assert terraform_rule(kind) is None, f"rostran now has a rule for {kind}: drop the allowance"
    for kind, argument in TERRAFORM_ARGUMENTS_MISSING_FROM_RULES:
        rule = terraform_rule(kind)
        assert rule is not None and argument not in rule.properties, f"{kind}.{argument} is in the rules now"


def test_the_hand_written_schema_names_only_real_properties() -> None:
    for ros_type, schema in RESOURCE_SCHEMAS.items():
        rule = ros_rule(ros_type)
        if rule is None:
            assert ros_type in ROS_TYPES_WITHOUT_RULES
            continue
        assert set(schema.properties) <= rule.properties, f"{ros_type}: {set(schema.properties) - rule.properties}"
