"""Alibaba Cloud's own resource mapping rules, read as data from the ``alibabacloud-ros-tran`` distribution.

rostran ships one YAML rule file per alicloud Terraform resource type (its ROS type, and for every
argument the ROS property it becomes or ``Ignore``) and one per ROS resource type (every property and
attribute, with its Terraform counterpart or ``Ignore``). Its transforms need the network; its rule
files do not. This module reads them lazily: a small index on first use, then one file per type on
demand, parsed once and kept in a bounded cache. Nothing of rostran's code is imported.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from importlib.abc import Traversable
from types import MappingProxyType
from typing import Any

import yaml

__all__ = ["PropertyRule", "RosRule", "TerraformRule", "ros_rule", "ros_types", "rules_version", "terraform_rule",
           "terraform_types"]

_TERRAFORM_DIR = ("terraform", "alicloud")
_ROS_DIR = ("ros", "resource")
# Larger than either rule set (about 810 Terraform and 670 ROS types), so a type is parsed once per process;
# parsed rules are compact (the whole set is about 12 MB), and the bound keeps a stray caller from growing it.
CACHE_SIZE = 1024
_HEADER = re.compile(rb"\n\s*From:\s*['\"]?([\w:]+)")
_DUPLICATE = re.compile(r"\$\$\d+$")  # rostran spells a second mapping of one ROS property "Name$$0"
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class PropertyRule:
    """How one Terraform argument (or nested block field) maps to ROS.

    ``to`` is the ROS property path ("VpcName", "Code.OssBucketName", "Servers.0.Port"); it is ``None`` when
    the rules ignore the argument, or when ``kind`` is "Map" and the block's fields merge into the parent.
    """

    to: str | None
    ignored: bool = False
    kind: str | None = None  # "List" or "Map" for blocks and collections
    schema: Mapping[str, PropertyRule] = field(default_factory=lambda: MappingProxyType({}))
    handler: str | None = None  # the name of rostran's value transform ("tags_dict_to_list", "to_int", ...)
    warning: str | None = None

    @property
    def mapped(self) -> bool:
        """Whether the argument has a ROS counterpart."""
        return not self.ignored and (self.to is not None or (self.kind == "Map" and bool(self.schema)))


@dataclass(frozen=True)
class TerraformRule:
    """One alicloud Terraform resource type: its ROS type, its arguments, and its attributes for references."""

    terraform_type: str
    ros_type: str
    properties: Mapping[str, PropertyRule]
    attributes: Mapping[str, PropertyRule]


@dataclass(frozen=True)
class RosRule:
    """One ROS resource type: the names of all its properties and attributes."""

    ros_type: str
    properties: frozenset[str]
    attributes: frozenset[str]


def _rules_root() -> Traversable:
    return resources.files("rostran").joinpath("rules")


_index_lock = threading.Lock()
_indexes: dict[tuple[str, ...], dict[str, Traversable]] = {}


def _index(folder: tuple[str, ...]) -> dict[str, Traversable]:
    """Rule files of one folder by the type they describe, read from each file's header (built once)."""
    index = _indexes.get(folder)
    if index is not None:
        return index
    with _index_lock:
        if folder not in _indexes:
            built: dict[str, Traversable] = {}
            directory = _rules_root().joinpath(*folder)
            for entry in sorted(directory.iterdir(), key=lambda item: item.name) if directory.is_dir() else []:
                if not entry.name.endswith(".yml"):
                    continue
                with entry.open("rb") as handle:
                    match = _HEADER.search(handle.read(512))
                if match:
                    built.setdefault(match.group(1).decode(), entry)
            _indexes[folder] = built
        return _indexes[folder]


def _load(entry: Traversable) -> dict[str, Any]:
    data = yaml.load(entry.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a safe loader (C or Python)
    return data if isinstance(data, dict) else {}


def _property_rule(raw: Any) -> PropertyRule:
    """One entry of a rule file; a bare string is shorthand for ``To``."""
    if isinstance(raw, str):
        return PropertyRule(to=raw)
    if not isinstance(raw, dict):
        return PropertyRule(to=None, ignored=True)
    to = raw.get("To")
    if isinstance(to, list):  # a composite id ("DBClusterId:AccountName"); not a single property
        to = None
    schema = raw.get("Schema")
    return PropertyRule(
        to=to if isinstance(to, str) else None,
        ignored=bool(raw.get("Ignore")),
        kind=raw.get("Type") if raw.get("Type") in ("List", "Map") else None,
        schema=_property_rules(schema) if isinstance(schema, dict) else MappingProxyType({}),
        handler=raw.get("Handler") if isinstance(raw.get("Handler"), str) else None,
        warning=raw.get("Warning") if isinstance(raw.get("Warning"), str) else None,
    )


def _property_rules(raw: Any) -> Mapping[str, PropertyRule]:
    if not isinstance(raw, dict):
        return MappingProxyType({})
    return MappingProxyType({str(name): _property_rule(rule) for name, rule in raw.items()})


@lru_cache(maxsize=CACHE_SIZE)
def terraform_rule(terraform_type: str) -> TerraformRule | None:
    """The rule for an alicloud Terraform resource type, or ``None`` when rostran has none."""
    entry = _index(_TERRAFORM_DIR).get(terraform_type)
    if entry is None:
        return None
    data = _load(entry)
    target = (data.get("ResourceType") or {}).get("To")
    if not isinstance(target, str):
        return None
    return TerraformRule(terraform_type, target, _property_rules(data.get("Properties")), _property_rules(data.get("Attributes")))


@lru_cache(maxsize=CACHE_SIZE)
def ros_rule(ros_type: str) -> RosRule | None:
    """Every property and attribute name of a ROS resource type, or ``None`` when rostran does not know the type."""
    entry = _index(_ROS_DIR).get(ros_type)
    if entry is None:
        return None
    data = _load(entry)

    def names(section: Any) -> frozenset[str]:
        return frozenset(_DUPLICATE.sub("", str(name)) for name in section) if isinstance(section, dict) else frozenset()

    return RosRule(ros_type, names(data.get("Properties")), names(data.get("Attributes")))


def terraform_types() -> frozenset[str]:
    """Every Terraform resource type the rules map to ROS."""
    return frozenset(_index(_TERRAFORM_DIR))


def ros_types() -> frozenset[str]:
    """Every ROS resource type the rules describe."""
    return frozenset(_index(_ROS_DIR))


def rules_version() -> str:
    """The rule set's version as rostran records it (for reports), or "unknown"."""
    try:
        versions = json.loads(_rules_root().joinpath("VERSIONS.json").read_text(encoding="utf-8"))
        return str(versions.get("latest", "unknown"))
    except (OSError, ValueError, AttributeError):
        return "unknown"
