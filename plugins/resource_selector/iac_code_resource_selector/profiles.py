"""The server's selector profiles: what the user may be asked to pick, each tied to a ROS association property,
and the profile hash a client declares (``sha256:`` + the SHA-256 of the profiles' canonical JSON)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OUTPUT_KINDS = ("resource_id", "resource_name", "endpoint", "version", "secret_reference", "derived_value")


@dataclass(frozen=True)
class Profile:
    """One selector: its id, the ROS ``associationProperty`` it fills, what the value is and the value's pattern."""

    id: str
    association_property: str
    output_kind: str
    pattern: str
    description: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "associationProperty": self.association_property, "outputKind": self.output_kind,
                "pattern": self.pattern}

    def valid(self, value: str) -> bool:
        """Whether ``value`` is one this selector can produce (its pattern, whole)."""
        return re.fullmatch(self.pattern, value) is not None


PROFILES: tuple[Profile, ...] = (
    Profile("vpc_id", "ALIYUN::ECS::VPC::VPCId", "resource_id", r"vpc-[a-z0-9]+", "a VPC"),
    Profile("vswitch_id", "ALIYUN::ECS::VSwitch::VSwitchId", "resource_id", r"vsw-[a-z0-9]+", "a vSwitch"),
    Profile("security_group_id", "ALIYUN::ECS::SecurityGroup::SecurityGroupId", "resource_id", r"sg-[a-z0-9]+",
            "a security group"),
    Profile("ecs_instance_type", "ALIYUN::ECS::Instance::InstanceType", "resource_name",
            r"ecs\.[a-z0-9-]+\.[a-z0-9-]+", "an ECS instance type"),
)
BY_ID: Mapping[str, Profile] = {p.id: p for p in PROFILES}


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def profile_hash(profiles: tuple[Profile, ...] = PROFILES) -> str:
    """``sha256:<hex>`` of the profiles' canonical JSON (a list, in order)."""
    return "sha256:" + hashlib.sha256(canonical([p.to_json() for p in profiles])).hexdigest()


PROFILE_HASH = profile_hash()
