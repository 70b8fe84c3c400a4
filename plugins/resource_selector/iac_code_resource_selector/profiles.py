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
    """One selector: its id, the ROS ``associationProperty`` it fills, what the value is and the value's pattern.

    A *derived* selector (``outputKind: derived_value``) names its ``source`` selector: its value derives from the
    source selector's earlier answer (e.g. the zone of the chosen vSwitch). ``metadata_key`` names the
    ``associationPropertyMetadata`` key that, when set to a literal, the value must equal."""

    id: str
    association_property: str
    output_kind: str
    pattern: str
    description: str
    source: str | None = None
    metadata_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"id": self.id, "associationProperty": self.association_property, "outputKind": self.output_kind,
                "pattern": self.pattern}
        if self.source is not None:
            data["source"] = self.source
        return data

    def valid(self, value: str, metadata: Mapping[str, Any] | None = None) -> bool:
        """Whether ``value`` is one this selector can produce (its pattern, whole) and agrees with the question's
        ``associationPropertyMetadata`` (the ``metadata_key`` entry, unless it is an unresolved ``${…}`` reference)."""
        if re.fullmatch(self.pattern, value) is None:
            return False
        fixed = (metadata or {}).get(self.metadata_key) if self.metadata_key else None
        if isinstance(fixed, str) and fixed and not fixed.startswith("${"):
            return value == fixed
        return True


PROFILES: tuple[Profile, ...] = (
    Profile("vpc_id", "ALIYUN::ECS::VPC::VPCId", "resource_id", r"vpc-[a-z0-9]+", "a VPC"),
    Profile("vswitch_id", "ALIYUN::ECS::VSwitch::VSwitchId", "resource_id", r"vsw-[a-z0-9]+", "a vSwitch"),
    Profile("security_group_id", "ALIYUN::ECS::SecurityGroup::SecurityGroupId", "resource_id", r"sg-[a-z0-9]+",
            "a security group"),
    Profile("ecs_instance_type", "ALIYUN::ECS::Instance::InstanceType", "resource_name",
            r"ecs\.[a-z0-9-]+\.[a-z0-9-]+", "an ECS instance type"),
    Profile("vswitch_zone_id", "ALIYUN::ECS::ZoneId", "derived_value", r"[a-z]{2}(-[a-z0-9]+)+",
            "the zone of the chosen vSwitch (derived from a vswitch_id answer)", source="vswitch_id",
            metadata_key="ZoneId"),
    Profile("vpc_cidr_block", "ALIYUN::ECS::VPC::CidrBlock", "derived_value",
            r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){3}/([0-9]|[12][0-9]|3[0-2])",
            "the IPv4 CIDR block of the chosen VPC (derived from a vpc_id answer)", source="vpc_id",
            metadata_key="CidrBlock"),
)
BY_ID: Mapping[str, Profile] = {p.id: p for p in PROFILES}


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def profile_hash(profiles: tuple[Profile, ...] = PROFILES) -> str:
    """``sha256:<hex>`` of the profiles' canonical JSON (a list, in order)."""
    return "sha256:" + hashlib.sha256(canonical([p.to_json() for p in profiles])).hexdigest()


PROFILE_HASH = profile_hash()
