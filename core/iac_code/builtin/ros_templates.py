"""Deterministic ROS template generation used by the offline runtime.

Only what the first form of the offline engine needs: a VPC with N vSwitches.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

NUMBER_WORDS = {
    "a": 1, "an": 1, "another": 1, "one": 1, "single": 1, "two": 2, "both": 2, "three": 3, "four": 4, "five": 5,
    "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5,
}
MAX_VSWITCHES = 16
_REGION = re.compile(r"\b([a-z]{2}(?:-[a-z]+){1,2}(?:-\d)?)\b")
_VSWITCH_COUNT = re.compile(
    r"(\d+|[a-z]+|[一两二三四五])\s*(?:个)?\s*(?:(?:more|extra|additional|new)\s+)?(?:v-?switch(?:es)?|交换机)",
    re.IGNORECASE)


def wants_vpc(prompt: str) -> bool:
    """Whether the prompt asks for a VPC."""
    return bool(re.search(r"\bvpc\b|专有网络", prompt, re.IGNORECASE))


def vswitch_count(prompt: str) -> int:
    """How many vSwitches the prompt asks for (default 1, at most 16)."""
    match = _VSWITCH_COUNT.search(prompt)
    if not match:
        return 1
    word = match.group(1).lower()
    count = int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)
    return max(1, min(count, MAX_VSWITCHES))


def mentions_vswitch(prompt: str) -> bool:
    return bool(re.search(r"v-?switch|交换机", prompt, re.IGNORECASE))


def vswitch_change(prompt: str) -> int | None:
    """+k for "add (k more|another) vSwitch(es)", -k for "remove k vSwitch(es)", else None."""
    text = prompt.lower()
    match = _VSWITCH_COUNT.search(text)
    amount = 1
    if match:
        word = match.group(1)
        amount = int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)
    if re.search(r"\b(add|another|more|extra)\b|增加|再加", text):
        return amount
    if re.search(r"\b(remove|delete|drop|fewer)\b|删除|减少", text):
        return -amount
    return None


def region_of(prompt: str) -> str | None:
    """An Alibaba Cloud region id mentioned in the prompt, if any."""
    for candidate in _REGION.findall(prompt.lower()):
        if candidate.split("-", 1)[0] in {"cn", "ap", "us", "eu", "me", "sa", "na"}:
            return candidate
    return None


def vpc_template(vswitches: int, region: str | None = None) -> dict[str, Any]:
    """A ROS template: one VPC (192.168.0.0/16) and ``vswitches`` /24 vSwitches."""
    resources: dict[str, Any] = {
        "Vpc": {
            "Type": "ALIYUN::ECS::VPC",
            "Properties": {"CidrBlock": {"Ref": "VpcCidrBlock"}, "VpcName": {"Ref": "VpcName"}},
        }
    }
    parameters: dict[str, Any] = {
        "VpcName": {"Type": "String", "Default": "iac-code-vpc", "Description": "Name of the VPC."},
        "VpcCidrBlock": {"Type": "String", "Default": "192.168.0.0/16", "Description": "CIDR block of the VPC."},
    }
    outputs: dict[str, Any] = {"VpcId": {"Description": "VPC ID.", "Value": {"Fn::GetAtt": ["Vpc", "VpcId"]}}}
    for index in range(1, vswitches + 1):
        zone = f"ZoneId{index}"
        parameters[zone] = {
            "Type": "String",
            "AssociationProperty": "ALIYUN::ECS::Instance::ZoneId",
            "Description": f"Zone of vSwitch {index}.",
        }
        resources[f"VSwitch{index}"] = {
            "Type": "ALIYUN::ECS::VSwitch",
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "ZoneId": {"Ref": zone},
                "CidrBlock": f"192.168.{index}.0/24",
                "VSwitchName": f"iac-code-vsw-{index}",
            },
        }
        outputs[f"VSwitch{index}Id"] = {
            "Description": f"ID of vSwitch {index}.",
            "Value": {"Fn::GetAtt": [f"VSwitch{index}", "VSwitchId"]},
        }
    description = f"A VPC with {vswitches} vSwitch{'es' if vswitches != 1 else ''}"
    if region:
        description += f" for {region}"
    return {
        "ROSTemplateFormatVersion": "2015-09-01",
        "Description": description + ".",
        "Parameters": parameters,
        "Resources": resources,
        "Outputs": outputs,
    }


def to_yaml(template: dict[str, Any]) -> str:
    return yaml.safe_dump(template, sort_keys=False, allow_unicode=True)
