"""Corpus-driven tests of the offline generation engine, its follow-up edits and the ROS schema check."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml
from iac_code_runtime_offline.engine.catalog import ROS_TYPES, TERRAFORM_PROVIDER_VERSION
from iac_code_runtime_offline.engine.generation import GenerationResult, generate, wants_generation
from iac_code_runtime_offline.engine.ros_schema import validate_ros

CORPUS: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "generation_corpus.yaml").read_text(encoding="utf-8"))


def _unquote(value: Any) -> Any:
    """python-hcl2 keeps the quotes of strings and labels; strip them for comparison."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(item) for item in value]
    if isinstance(value, dict):
        return {_unquote(key): _unquote(item) for key, item in value.items()}
    return value


def _terraform_resources(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(alicloud type, body) of every resource block in HCL text."""
    parsed = _unquote(hcl2.loads(text))
    return [(kind, body) for group in parsed.get("resource", []) for kind, named in group.items() for body in named.values()]


def _ros_resources(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(resource["Type"], resource.get("Properties", {})) for resource in template["Resources"].values()]


def _at(value: Any, path: str) -> Any:
    """The value at a dotted path ("DiskMappings.0.Size"; "Fn::GetAtt" is one step)."""
    for step in path.replace("Fn::GetAtt", "Fn__GetAtt").split("."):
        step = step.replace("Fn__GetAtt", "Fn::GetAtt")
        if isinstance(value, list):
            value = value[int(step)] if step.isdigit() and int(step) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(step)
        else:
            return None
    return value


def _parse_back(result: GenerationResult) -> list[tuple[str, dict[str, Any]]]:
    """Check the rendered text parses in its format and return its resources."""
    if result.format == "terraform":
        assert result.template is None
        assert result.file_name == "main.tf"
        parsed = _unquote(hcl2.loads(result.text))
        provider = parsed["terraform"][0]["required_providers"][0]["alicloud"]
        assert provider == {"source": "aliyun/alicloud", "version": TERRAFORM_PROVIDER_VERSION}
        return _terraform_resources(result.text)
    loaded = json.loads(result.text) if result.format == "ros-json" else yaml.safe_load(result.text)
    assert loaded == result.template
    assert result.file_name == ("template.ros.json" if result.format == "ros-json" else "template.ros.yaml")
    assert validate_ros(result.template) == []
    return _ros_resources(result.template)


def test_corpus_is_big_and_mixed() -> None:
    assert len(CORPUS) >= 150
    assert sum(any("\u4e00" <= char <= "\u9fff" for char in case["prompt"]) for case in CORPUS) >= 30
    assert sum(case["format"] == "terraform" for case in CORPUS) >= 30
    assert {case["format"] for case in CORPUS} == {"ros-yaml", "ros-json", "terraform"}


@pytest.mark.parametrize("case", CORPUS, ids=[case["prompt"][:60] for case in CORPUS])
def test_corpus(case: dict[str, Any]) -> None:
    assert wants_generation(case["prompt"], None)
    result = generate(case["prompt"])
    assert result.format == case["format"]
    json.dumps(result.spec)  # the session stores it
    resources = _parse_back(result)
    counts = Counter(kind for kind, _ in resources)
    for kind, expected in case["resources"].items():
        assert counts[kind] == expected, f"{kind}: {counts}"
    for kind in case.get("absent", []):
        assert counts[kind] == 0, f"{kind} unexpected: {counts}"
    for check in case.get("properties", []):
        values = [_at(body, check["path"]) for kind, body in resources if kind == check["type"]]
        assert check["equals"] in values, f"{check}: {values}"
    assert result.unmapped == case.get("unmapped", [])
    if "region" in case:
        assert result.spec["region"] == case["region"]
    if case.get("ingress"):
        _check_ingress(result, case)
    assert result.summary.startswith("Generated a ") and result.summary.endswith(".")


def _check_ingress(result: GenerationResult, case: dict[str, Any]) -> None:
    assert result.template is not None
    group = next(body for kind, body in _ros_resources(result.template) if kind == "ALIYUN::ECS::SecurityGroup")
    rules = {rule["PortRange"]: rule["SourceCidrIp"] for rule in group["SecurityGroupIngress"]}
    assert sorted(rules) == sorted(case["ingress"])
    for port_range, source in case.get("sources", {}).items():
        assert rules[port_range] == source


def test_secure_defaults() -> None:
    result = generate("Create 2 ECS instances with SSH and RDP, a Redis and an OSS bucket")
    assert result.template is not None
    parameters = result.template["Parameters"]
    for name in ("InstancePassword", "RedisPassword"):
        assert parameters[name]["NoEcho"] is True and "Default" not in parameters[name]
    assert parameters["ZoneId1"]["AssociationProperty"] == "ALIYUN::ECS::Instance::ZoneId"
    ingress = result.template["Resources"]["SecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert all(rule["SourceCidrIp"] != "0.0.0.0/0" for rule in ingress)
    bucket = result.template["Resources"]["Bucket"]["Properties"]
    assert bucket["AccessControl"] == "private" and bucket["ServerSideEncryptionConfiguration"]
    instance = result.template["Resources"]["Instance1"]["Properties"]
    assert instance["Password"] == {"Ref": "InstancePassword"} and instance["VSwitchId"] == {"Ref": "VSwitch1"}
    assert result.template["Resources"]["Instance2"]["Properties"]["SecurityGroupId"] == {"Ref": "SecurityGroup"}


def test_follow_up_chain() -> None:
    first = generate("Create a VPC with 2 vSwitches in cn-hangzhou")
    assert first.resources == ["vpc", "vswitch"]
    previous = copy.deepcopy(first.spec)

    second = generate("now add outputs for the VPC and vSwitch IDs", first.spec)
    assert first.spec == previous, "generate must not mutate the previous spec"
    assert second.template is not None and {"VpcId", "VSwitch1Id", "VSwitch2Id"} <= set(second.template["Outputs"])

    third = generate("add tags for environment and owner", second.spec)
    assert third.template is not None
    for name in ("Vpc", "VSwitch1", "VSwitch2"):
        keys = [tag["Key"] for tag in third.template["Resources"][name]["Properties"]["Tags"]]
        assert keys == ["environment", "owner"]

    fourth = generate("use 3 vSwitches", third.spec)
    assert fourth.template is not None
    assert sum(r["Type"] == "ALIYUN::ECS::VSwitch" for r in fourth.template["Resources"].values()) == 3

    fifth = generate("add another vSwitch and an OSS bucket", fourth.spec)
    assert fifth.template is not None and validate_ros(fifth.template) == []
    assert [k for k in fifth.template["Resources"] if k.startswith("VSwitch")] == [f"VSwitch{i}" for i in range(1, 5)]
    assert fifth.template["Resources"]["Bucket"]["Properties"]["Tags"] == {"environment": "dev", "owner": "iac-code"}

    sixth = generate("switch to Terraform and change the region to cn-shanghai", fifth.spec)
    assert sixth.format == "terraform" and sixth.file_name == "main.tf"
    parsed = _unquote(hcl2.loads(sixth.text))
    assert parsed["provider"][0]["alicloud"]["region"] == "cn-shanghai"
    counts = Counter(kind for kind, _ in _terraform_resources(sixth.text))
    assert counts["alicloud_vswitch"] == 4 and counts["alicloud_oss_bucket"] == 1
    vpc = next(body for kind, body in _terraform_resources(sixth.text) if kind == "alicloud_vpc")
    assert vpc["tags"] == {"environment": "dev", "owner": "iac-code"}

    seventh = generate("as JSON please", sixth.spec)
    assert seventh.format == "ros-json" and json.loads(seventh.text) == seventh.template


def test_follow_up_adds_and_removes_blocks() -> None:
    result = generate("Create a VPC with an ECS instance and a NAT gateway")
    result = generate("add 2 more ECS instances and open port 443", result.spec)
    assert result.spec["ecs"]["count"] == 3
    assert result.template is not None and validate_ros(result.template) == []
    result = generate("change the instance type to ecs.c7.2xlarge", result.spec)
    assert {r["Properties"]["InstanceType"] for r in result.template["Resources"].values()  # type: ignore[union-attr]
            if r["Type"] == "ALIYUN::ECS::Instance"} == {"ecs.c7.2xlarge"}
    result = generate("remove the NAT gateway", result.spec)
    assert "nat_gateway" not in result.resources and "ecs_instance" in result.resources
    assert result.template is not None and validate_ros(result.template) == []


def test_limits_are_reported_not_dropped() -> None:
    assert generate("Create 50 ECS instances").unmapped == ["ECS instances beyond 20 (at most 20 per template)"]
    assert generate("Create a VPC with 20 vswitches").unmapped == ["vSwitches beyond 16 (at most 16 fit)"]
    both = generate("create a public ALB and an SLB")
    assert both.resources == ["vpc", "vswitch", "alb"] and both.unmapped[0].startswith("SLB")


def test_removal_phrases() -> None:
    spec = generate("Create a VPC with an ECS instance and a NAT gateway").spec
    for prompt in ("no more NAT", "remove the NAT gateway", "去掉NAT网关"):
        assert wants_generation(prompt, spec)
        assert "nat_gateway" not in generate(prompt, spec).resources
    assert generate("add another vSwitch", spec).spec["vswitches"][1] == {"cidr": None, "zone": None}


def test_follow_up_reports_unmapped() -> None:
    first = generate("Create a VPC")
    second = generate("also add an Elasticsearch cluster", first.spec)
    assert second.unmapped == ["Elasticsearch"]
    assert second.resources == ["vpc", "vswitch"]
    third = generate("also add a Kubernetes cluster", first.spec)  # now in the catalog: added, not reported
    assert third.unmapped == [] and third.resources[-2:] == ["ack_cluster", "ack_node_pool"]


@pytest.mark.parametrize("prompt,previous,expected", [
    ("Create a VPC with two vSwitches", None, True),
    ("帮我生成一个包含ECS和RDS的模板", None, True),
    ("What is a VPC?", None, False),
    ("hello there", None, False),
    ("add an OSS bucket", {"vpc": {}}, True),
    ("switch to Terraform", {"vpc": {}}, True),
    ("thanks!", {"vpc": {}}, False),
])
def test_wants_generation(prompt: str, previous: dict[str, Any] | None, expected: bool) -> None:
    spec = generate("Create a VPC").spec if previous is not None else None
    assert wants_generation(prompt, spec) is expected


def _valid_template() -> dict[str, Any]:
    result = generate("Create a VPC with one vSwitch and an ECS instance")
    assert result.template is not None and validate_ros(result.template) == []
    return copy.deepcopy(result.template)


def test_validate_ros_catches_bad_type() -> None:
    template = _valid_template()
    template["Resources"]["Vpc"]["Type"] = "ALIYUN::ECS::NoSuchThing"
    assert any("unknown or unsupported resource type" in problem for problem in validate_ros(template))


def test_validate_ros_catches_dangling_ref() -> None:
    template = _valid_template()
    template["Resources"]["VSwitch1"]["Properties"]["VpcId"] = {"Ref": "MissingVpc"}
    assert any("MissingVpc" in problem for problem in validate_ros(template))


def test_validate_ros_catches_missing_required_property() -> None:
    template = _valid_template()
    del template["Resources"]["VSwitch1"]["Properties"]["ZoneId"]
    assert any("missing required property 'ZoneId'" in problem for problem in validate_ros(template))


def test_validate_ros_catches_other_problems() -> None:
    template = _valid_template()
    template["Resources"]["Instance1"]["Properties"]["NotAProperty"] = 1
    template["Outputs"]["Bad"] = {"Value": {"Fn::GetAtt": ["Ghost", "Id"]}}
    template["Outputs"]["BadAttribute"] = {"Value": {"Fn::GetAtt": ["Vpc", "NoSuchAttribute"]}}
    template["Resources"]["Instance1"]["Properties"]["SystemDiskSize"] = [40]
    del template["ROSTemplateFormatVersion"]
    problems = "\n".join(validate_ros(template))
    expected = ("NotAProperty", "'Ghost'", "NoSuchAttribute", "SystemDiskSize: expected integer", "ROSTemplateFormatVersion")
    for fragment in expected:
        assert fragment in problems


def test_schema_covers_catalog() -> None:
    from iac_code_runtime_offline.engine.ros_schema import RESOURCE_SCHEMAS

    assert set(RESOURCE_SCHEMAS) == set(ROS_TYPES)
