"""Deterministic (no LLM, no network) generation of ROS / Terraform templates from requests.

A request in English or Chinese is read into a *delta* (``request_parsing``), which is applied to
the previous *spec* (a JSON-serialisable dict the caller keeps in the session). The spec is then
rendered as a ROS template (YAML or JSON) or as Terraform HCL. Follow-ups therefore edit the state
instead of starting over, and anything we cannot map is reported in ``unmapped``, never dropped.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from iac_code_runtime_offline.engine.catalog import RESOURCE_TYPES, ROS_TEMPLATE_VERSION
from iac_code_runtime_offline.engine.cloud_documents import ram_documents, split_domain
from iac_code_runtime_offline.engine.intent import wants_generation
from iac_code_runtime_offline.engine.request_parsing import ANYWHERE, DEFAULT_IMAGE, RDS_DEFAULTS, parse_request, stated_values
from iac_code_runtime_offline.engine.terraform_render import listener_ports, render_terraform

# libyaml's emitter when installed: the same text, about five times faster than the pure-Python one.
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
MAX_VSWITCHES = 16
MAX_INSTANCES = 20
MAX_EIPS = 20
DEFAULT_VPC_CIDR = "192.168.0.0/16"
FORMATS = {"ros-yaml": "template.ros.yaml", "ros-json": "template.ros.json", "terraform": "main.tf"}
__all__ = ["GenerationResult", "apply_delta", "building_blocks", "describe", "empty_spec", "generate", "parse_request",
           "ram_documents", "render", "render_ros", "resolve", "split_domain", "wants_generation"]


@dataclass(frozen=True)
class GenerationResult:
    """What ``generate`` built: the state to keep (``spec``) and the rendered template."""

    spec: dict[str, Any]
    format: str
    text: str
    file_name: str
    template: dict[str, Any] | None
    resources: list[str]
    unmapped: list[str] = field(default_factory=list)
    summary: str = ""


def empty_spec() -> dict[str, Any]:
    """The state before anything is built."""
    return {
        "version": 1, "format": "ros-yaml", "region": None, "vpc": None, "vswitches": [], "security_group": None,
        "ecs": None, "load_balancer": None, "nat": None, "eip": None, "rds": None, "redis": None, "oss": None,
        "kms": None, "sls": None, "mongodb": None, "polardb": None, "dns": None, "nas": None, "ram": None, "fc": None,
        "ack": None, "ess": None,
        "tags": {}, "unmapped": [],
    }


_NETWORKED = ("ecs", "load_balancer", "nat", "rds", "redis", "mongodb", "polardb", "nas", "ack", "ess")


def _apply_vswitches(spec: dict[str, Any], delta: dict[str, Any]) -> None:
    """Resize/annotate the vSwitch list; networked resources need at least one (ALB two, in two zones)."""
    vswitches: list[dict[str, Any]] = spec["vswitches"]
    target = len(vswitches)
    if "vswitch_count" in delta:
        count, relative = delta["vswitch_count"]
        target = target + count if relative else count
    needs_network = spec["vpc"] is not None or any(spec[key] for key in _NETWORKED)
    # Zones and CIDRs shape the network's vSwitches; with no network they are not used (and the reply says so).
    explicit = delta.get("vswitch_cidrs", []) if needs_network else []
    zones = delta.get("zones", []) if needs_network else []
    target = max(target, len(explicit), len(zones))
    lb = spec["load_balancer"]
    multi_zone = (lb and lb["kind"] in ("alb", "nlb")) or spec.get("ack") or spec.get("ess") or (spec["rds"] or {}).get("ha")
    minimum = 2 if multi_zone else (1 if needs_network else 0)
    limit = min(MAX_VSWITCHES, _subnet_capacity(spec["vpc"]["cidr"])) if spec["vpc"] else MAX_VSWITCHES
    if target > limit:
        delta["unmapped"].append(f"vSwitches beyond {limit} (at most {limit} fit)")
    target = max(minimum, min(target, limit))
    del vswitches[target:]
    while len(vswitches) < target:
        vswitches.append({"cidr": None, "zone": None})
    for index, cidr in enumerate(explicit[:target]):
        vswitches[index]["cidr"] = cidr
    for index, zone in enumerate(zones[:target]):
        vswitches[index]["zone"] = zone


def _merge(current: dict[str, Any] | None, settings: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    merged = dict(defaults) if current is None else dict(current)
    merged.update({key: value for key, value in settings.items() if key != "count"})
    return merged


def _apply_ecs(spec: dict[str, Any], delta: dict[str, Any], wanted: bool) -> None:
    settings = delta["ecs"]
    if not wanted and not (spec["ecs"] and settings):
        return
    defaults = {"count": 1, "instance_type": "ecs.g7.large", "image": DEFAULT_IMAGE, "system_disk": 40, "data_disk": None}
    ecs = _merge(spec["ecs"], settings, defaults)
    if delta["names"].get("ecs"):
        ecs["name"] = delta["names"]["ecs"]
    if ecs["image"].startswith("win") and ecs["system_disk"] < 40:
        ecs["system_disk"] = 40  # Windows images need 40 GB
    if "count" in settings:
        count, relative = settings["count"]
        ecs["count"] = ecs["count"] + count if relative and spec["ecs"] else count
    if ecs["count"] > MAX_INSTANCES:
        delta["unmapped"].append(f"ECS instances beyond {MAX_INSTANCES} (at most {MAX_INSTANCES} per template)")
    ecs["count"] = max(1, min(ecs["count"], MAX_INSTANCES))
    spec["ecs"] = ecs


def _apply_rds(spec: dict[str, Any], delta: dict[str, Any], wanted: bool) -> None:
    settings = delta["rds"]
    if not wanted and not (spec["rds"] and settings):
        return
    current = spec["rds"]
    engine = settings.get("engine") or (current or {}).get("engine") or "MySQL"
    version, db_class = RDS_DEFAULTS[engine]
    if current and current["engine"] != engine:
        current = None  # a new engine invalidates the old version and class
    rds = _merge(current, settings, {"engine": engine, "version": version, "class": db_class, "storage": 50,
                                     "account": None, "whitelist": None, "ha": False})
    if delta["names"].get("rds"):
        rds["name"] = delta["names"]["rds"]
    spec["rds"] = rds


def _apply_blocks(spec: dict[str, Any], delta: dict[str, Any]) -> None:
    """Add, update and remove building blocks."""
    add, remove = set(delta["add"]), set(delta["remove"])
    keys = {"slb": "load_balancer", "alb": "load_balancer", "nlb": "load_balancer", "security_group": "security_group",
            "nat": "nat", "eip": "eip",
            "redis": "redis", "oss": "oss", "ecs": "ecs", "rds": "rds", "vpc": "vpc", "kms": "kms", "sls": "sls",
            "mongodb": "mongodb", "polardb": "polardb", "dns": "dns", "nas": "nas", "ram": "ram", "fc": "fc", "ack": "ack",
            "ess": "ess"}
    for block in remove:
        if block in keys:
            spec[keys[block]] = None
        if block == "nat" and spec["eip"] and spec["eip"].get("with_nat") and "eip" not in add:
            spec["eip"] = None  # the NAT gateway's own EIPs go with it
        if block == "vswitch" and "vswitch_count" not in delta:
            spec["vswitches"] = spec["vswitches"][:-1]
    _apply_ecs(spec, delta, "ecs" in add)
    _apply_rds(spec, delta, "rds" in add)
    if "redis" in add or (spec["redis"] and delta["redis"]):
        spec["redis"] = _merge(spec["redis"], delta["redis"], {"version": "5.0", "class": "redis.master.small.default"})
    if "oss" in add or (spec["oss"] and delta["oss"]):
        spec["oss"] = _merge(spec["oss"], delta["oss"], {"name": None, "encryption": "AES256", "acl": "private",
                                                          "versioning": False, "expire_days": None})
    if "kms" in add:
        spec["kms"] = spec["kms"] or {"rotation_days": 365}
    if "ess" in add or (spec.get("ess") and (delta.get("ess") or delta["ecs"])):
        settings = dict(delta.get("ess", {}))
        for key in ("instance_type", "image", "system_disk"):
            if key in delta["ecs"]:
                settings[key] = delta["ecs"][key]
        ess = _merge(spec.get("ess"), settings, {"min": 1, "max": 4, "instance_type": "ecs.g7.large", "image": DEFAULT_IMAGE,
                                                 "system_disk": 40})
        ess["min"], ess["max"] = max(0, min(ess["min"], 1000)), max(1, min(ess["max"], 1000))
        if ess["min"] > ess["max"]:
            ess["min"], ess["max"] = ess["max"], ess["min"]
        spec["ess"] = ess
    if "ack" in add or (spec.get("ack") and delta.get("ack")):
        spec["ack"] = _merge(spec.get("ack"), delta.get("ack", {}),
                             {"nodes": 3, "node_type": "ecs.g7.xlarge", "version": None, "public_api": False})
    if "fc" in add or (spec.get("fc") and delta.get("fc")):
        spec["fc"] = _merge(spec.get("fc"), delta.get("fc", {}),
                            {"service": "iac-code-service", "function": "handler", "runtime": "python3.10", "memory": 512,
                             "timeout": 60, "http": False, "anonymous": False})
    if "ram" in add or (spec.get("ram") and delta.get("ram")):
        spec["ram"] = _merge(spec.get("ram"), delta.get("ram", {}),
                             {"name": "iac-code-role", "principal": "ecs.aliyuncs.com", "actions": [], "bucket": None})
    if "nas" in add or (spec.get("nas") and delta.get("nas")):
        spec["nas"] = _merge(spec.get("nas"), delta.get("nas", {}), {"protocol": "NFS", "storage": "Performance"})
    if "dns" in add or (spec.get("dns") and delta.get("dns")):
        spec["dns"] = _merge(spec.get("dns"), delta.get("dns", {}),
                             {"name": None, "type": None, "value": None, "ttl": 600})
    if "mongodb" in add or (spec.get("mongodb") and delta.get("mongodb")):
        spec["mongodb"] = _merge(spec.get("mongodb"), delta.get("mongodb", {}),
                                 {"version": "6.0", "class": "dds.mongo.mid", "storage": 20})
    if "polardb" in add or (spec.get("polardb") and delta.get("polardb")):
        settings = delta.get("polardb", {})
        engine = settings.get("engine") or (spec.get("polardb") or {}).get("engine") or "MySQL"
        defaults = ({"engine": "MySQL", "version": "8.0", "class": "polar.mysql.x4.medium"} if engine == "MySQL"
                    else {"engine": "PostgreSQL", "version": "14", "class": "polar.pg.x4.medium"})
        current = spec.get("polardb") if (spec.get("polardb") or {}).get("engine") == engine else None
        spec["polardb"] = _merge(current, settings, defaults)
    if "sls" in add or (spec.get("sls") and delta.get("sls")):
        spec["sls"] = _merge(spec.get("sls"), delta.get("sls", {}),
                             {"project": None, "logstore": "app-logs", "ttl": 30, "shards": 2})
    if "nat" in add:
        spec["nat"] = spec["nat"] or {"bandwidth": 5}
    _apply_eips(spec, delta, "eip" in add)
    kinds = [kind for kind in ("alb", "nlb", "slb") if kind in add]
    for extra in kinds[1:]:
        delta["unmapped"].append(f"{extra.upper()} (one load balancer per template; the {kinds[0].upper()} was used)")
    for kind in ("alb", "nlb", "slb"):
        if kind in add:
            current = spec["load_balancer"] or {}
            public = delta.get("public", current.get("public", kind in ("alb", "nlb") or bool(spec["ecs"])))
            spec["load_balancer"] = {**current, "kind": kind, "public": public}
            break
    if spec["load_balancer"]:
        lb = spec["load_balancer"]
        lb.update({key: value for key, value in delta["load_balancer"].items() if key in ("listeners", "spec", "bandwidth")})
        name = next((delta["names"][kind] for kind in ("slb", "alb", "nlb") if delta["names"].get(kind)), None)
        if name:
            lb["name"] = name
        if "public" in delta and not kinds:
            lb["public"] = delta["public"]
    if "security_group" in add or delta.get("rules") or ((spec["ecs"] or spec.get("ess")) and spec["security_group"] is None):
        spec["security_group"] = spec["security_group"] or {"rules": []}
    if "vpc" in add or "vswitch" in add or "vswitch_count" in delta or "vpc_cidr" in delta:
        spec["vpc"] = spec["vpc"] or {"cidr": DEFAULT_VPC_CIDR}
    if any(spec[key] for key in _NETWORKED) or spec["security_group"]:
        spec["vpc"] = spec["vpc"] or {"cidr": DEFAULT_VPC_CIDR}
    if delta.get("existing_vpc") and spec["vpc"]:
        spec["vpc"]["existing"] = True  # ids become parameters: nothing of the network is created
    _apply_names(spec, delta)


def _apply_eips(spec: dict[str, Any], delta: dict[str, Any], wanted: bool) -> None:
    """The EIPs: how many ("two EIPs", "a second EIP") and their bandwidth; a NAT gateway always has one."""
    settings = delta["eip"]
    if not (wanted or spec["nat"] or (spec["eip"] and settings)):
        return
    eip = dict(spec["eip"] or {"bandwidth": (spec["nat"] or {}).get("bandwidth", 5), "count": 1, "with_nat": not wanted})
    eip.setdefault("count", 1)
    if "count" in settings:
        count, relative = settings["count"]
        eip["count"] = eip["count"] + count if relative and spec["eip"] else count
    if eip["count"] > MAX_EIPS:
        delta["unmapped"].append(f"EIPs beyond {MAX_EIPS} (at most {MAX_EIPS} per template)")
    eip["count"] = max(1, min(eip["count"], MAX_EIPS))
    if "bandwidth" in settings:
        eip["bandwidth"] = settings["bandwidth"]
    spec["eip"] = eip


_NAMED = ("vpc", "security_group", "redis", "oss", "ack", "ess", "mongodb", "polardb", "nas")


def _apply_names(spec: dict[str, Any], delta: dict[str, Any]) -> None:
    """Names given to blocks ("a VPC named prod-vpc"), and the allow-lists written with a database."""
    for block in _NAMED:
        name = delta["names"].get(block)
        if name and spec.get(block) is not None:
            if block == "oss" and delta["oss"].get("name"):
                continue  # the bucket parser read it already
            spec[block] = {**spec[block], "name": name.lower() if block == "oss" else name}
    for block in ("redis", "mongodb", "polardb"):
        whitelist = (delta.get(block) or {}).get("whitelist")
        if whitelist and spec.get(block):
            spec[block]["whitelist"] = whitelist


def _apply_rules(spec: dict[str, Any], delta: dict[str, Any]) -> None:
    """Append new ingress rules, filling in a secure default source where none was given."""
    if not spec["security_group"]:
        return
    vpc_cidr = spec["vpc"]["cidr"] if spec["vpc"] else DEFAULT_VPC_CIDR
    rules: list[dict[str, str]] = spec["security_group"]["rules"]
    restrict = delta.get("restrict_source")
    if restrict and not delta.get("rules"):  # "only from 203.0.113.0/24 though": the admin ports get that source
        admin = [rule for rule in rules if rule["port_range"] not in ("80/80", "443/443")] or rules
        for rule in admin:
            rule["source"] = restrict
    for rule in delta.get("rules", []):
        rule = dict(rule)
        if not rule["source"]:
            web = rule["port_range"] in ("80/80", "443/443")
            rule["source"] = ANYWHERE if web else vpc_cidr
        if rule not in rules:
            rules.append(rule)


def _covering_cidr(current: str, inner: list[str]) -> str:
    """``current`` if it holds every ``inner`` CIDR, else the smallest /16-or-larger network that does."""
    networks = [ipaddress.ip_network(cidr, strict=False) for cidr in inner]
    if all(network.subnet_of(ipaddress.ip_network(current, strict=False)) for network in networks):
        return current
    for prefix in range(min(16, networks[0].prefixlen), 7, -1):
        candidate = networks[0].supernet(new_prefix=prefix)
        if all(network.subnet_of(candidate) for network in networks):
            return str(candidate)
    return current


def apply_delta(previous: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    """The new spec: ``previous`` (or an empty spec) edited by ``delta``."""
    spec = copy.deepcopy(previous) if previous else empty_spec()
    for key in ("format", "region"):
        if key in delta:
            spec[key] = delta[key]
    _apply_blocks(spec, delta)
    if spec["vpc"] and "vpc_cidr" in delta:
        spec["vpc"]["cidr"] = delta["vpc_cidr"]
    elif spec["vpc"] and delta.get("vswitch_cidrs"):
        spec["vpc"]["cidr"] = _covering_cidr(spec["vpc"]["cidr"], delta["vswitch_cidrs"])
    _apply_vswitches(spec, delta)
    _apply_rules(spec, delta)
    if "tags" in delta:
        spec["tags"] = {**spec["tags"], **delta["tags"]}
    spec["unmapped"] = list(dict.fromkeys(spec["unmapped"] + delta["unmapped"]))
    return spec


# ---------------------------------------------------------------- resolution (derived values)


def _subnet_prefix(vpc_cidr: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int]:
    """The VPC network and the prefix of the vSwitch CIDRs carved out of it (/24, or 4 bits more for small VPCs)."""
    network = ipaddress.ip_network(vpc_cidr, strict=False)
    return network, 24 if network.prefixlen <= 20 else min(network.prefixlen + 4, 29)


def _subnet_capacity(vpc_cidr: str) -> int:
    """How many derived vSwitch CIDRs fit into the VPC CIDR."""
    network, new_prefix = _subnet_prefix(vpc_cidr)
    return 2 ** max(0, new_prefix - network.prefixlen)


def _derive_cidrs(vpc_cidr: str, vswitches: list[dict[str, Any]]) -> list[str]:
    """vSwitch CIDRs: explicit ones kept, the rest carved out of the VPC CIDR without overlap (x.x.1.0 first)."""
    network, new_prefix = _subnet_prefix(vpc_cidr)
    size = 2 ** (network.max_prefixlen - new_prefix)
    capacity = _subnet_capacity(vpc_cidr)
    candidates = iter([*range(1, capacity), 0])
    taken = [ipaddress.ip_network(v["cidr"], strict=False) for v in vswitches if v["cidr"]]
    result: list[str] = []
    for vswitch in vswitches:
        if vswitch["cidr"]:
            result.append(vswitch["cidr"])
            continue
        subnet = network  # fallback when the VPC is full of explicit CIDRs: validation by the cloud will say so
        for candidate in candidates:
            option = ipaddress.ip_network(f"{network.network_address + candidate * size}/{new_prefix}")
            if not any(option.overlaps(other) for other in taken):
                subnet = option
                break
        taken.append(subnet)
        result.append(str(subnet))
    return result


def resolve(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` with every derived value (vSwitch CIDRs, bucket name) filled in, ready to render."""
    resolved = copy.deepcopy(spec)
    if resolved["vpc"]:
        cidrs = _derive_cidrs(resolved["vpc"]["cidr"], resolved["vswitches"])
        for vswitch, cidr in zip(resolved["vswitches"], cidrs, strict=True):
            vswitch["cidr"] = cidr
    if resolved["oss"] and not resolved["oss"]["name"]:
        resolved["oss"]["name"] = "iac-code-bucket"
    if resolved.get("dns"):
        dns = resolved["dns"]
        dns["name"] = dns["name"] or "www.example.com"
        if not dns["value"]:  # point at what this template makes public, when it makes something public
            dns["value"] = ("@load_balancer" if resolved["load_balancer"] and resolved["load_balancer"].get("public", True)
                            else "@eip" if resolved["nat"] or resolved["eip"] else "@parameter")
        if not dns["type"]:
            value = dns["value"]
            address = value in ("@load_balancer", "@eip", "@parameter") or re.fullmatch(r"(?:\d{1,3}\.){3}\d{1,3}", value)
            dns["type"] = "A" if address else "AAAA" if ":" in value else "CNAME"
        if dns["value"] == "@load_balancer" and resolved["load_balancer"]["kind"] in ("alb", "nlb"):
            dns["type"] = "CNAME"  # an ALB is reached by its DNS name
    if resolved.get("sls") and not resolved["sls"]["project"]:
        resolved["sls"]["project"] = "iac-code-logs"
    _resolve_settings(resolved)
    return resolved


_DEFAULT_NAMES = {"vpc": "iac-code-vpc", "security_group": "iac-code-sg", "redis": "iac-code-redis", "rds": "iac-code-db",
                  "mongodb": "iac-code-mongodb", "polardb": "iac-code-polardb", "nas": "iac-code-nas", "ack": "iac-code-ack",
                  "ess": "iac-code-asg"}
_POD_CIDRS = ("172.20.0.0/16", "10.244.0.0/16", "192.168.0.0/16")
_SERVICE_CIDRS = ("172.21.0.0/20", "10.96.0.0/20", "192.168.240.0/20")


def _resolve_settings(resolved: dict[str, Any]) -> None:
    """Defaults of the settings a request may leave out: names, disks, EIPs, listeners, the cluster's own CIDRs."""
    for block, name in _DEFAULT_NAMES.items():
        if resolved.get(block) is not None and not resolved[block].get("name"):
            resolved[block]["name"] = name
    if resolved["ecs"]:
        ecs = resolved["ecs"]
        ecs.setdefault("system_disk_category", "cloud_essd")
        ecs.setdefault("data_disk_category", "cloud_essd")
        ecs.setdefault("data_disk_count", 1)
        ecs.setdefault("name", None)
        ecs.setdefault("hostname", None)
    if resolved["eip"] or resolved["nat"]:
        eip = dict(resolved["eip"] or {})
        eip.setdefault("bandwidth", (resolved["nat"] or {}).get("bandwidth", 5))
        eip.setdefault("count", 1)
        resolved["eip"] = eip
    if resolved["load_balancer"]:
        lb = resolved["load_balancer"]
        lb.setdefault("name", f"iac-code-{lb['kind']}")
        lb["ports"] = listener_ports(resolved)
    if resolved.get("ack"):
        vpc = ipaddress.ip_network(resolved["vpc"]["cidr"], strict=False) if resolved["vpc"] else None
        free = [cidr for cidr in _POD_CIDRS if not (vpc and vpc.overlaps(ipaddress.ip_network(cidr)))]
        resolved["ack"]["pod_cidr"] = free[0] if free else _POD_CIDRS[0]
        pod = ipaddress.ip_network(resolved["ack"]["pod_cidr"])
        services = [cidr for cidr in _SERVICE_CIDRS
                    if not (vpc and vpc.overlaps(ipaddress.ip_network(cidr))) and not pod.overlaps(ipaddress.ip_network(cidr))]
        resolved["ack"]["service_cidr"] = services[0] if services else _SERVICE_CIDRS[0]


def building_blocks(spec: dict[str, Any]) -> list[str]:
    """The catalog building blocks a spec renders to, in template order."""
    blocks: list[str] = []
    existing = bool(spec["vpc"] and spec["vpc"].get("existing"))
    if spec["vpc"] and not existing:
        blocks.append("vpc")
    if spec["vswitches"] and not existing:
        blocks.append("vswitch")
    if spec["security_group"]:
        blocks.append("security_group")
    if spec["ecs"]:
        blocks.append("ecs_instance")
    if spec["load_balancer"]:
        blocks.append(spec["load_balancer"]["kind"])
    if spec["nat"]:
        blocks += ["nat_gateway", "eip", "eip_association", "snat_entry"]
    elif spec["eip"]:
        blocks += ["eip", "eip_association"] if spec["ecs"] else ["eip"]
    blocks += [name for name, key in (("rds", "rds"), ("redis", "redis"), ("redis_whitelist", "redis"), ("oss_bucket", "oss"))
               if spec[key]]
    if spec.get("mongodb"):
        blocks.append("mongodb")
    if spec.get("polardb"):
        blocks.append("polardb")
    if spec.get("nas"):
        blocks += ["nas_file_system", "nas_mount_target"]
    if spec.get("ram"):
        blocks += ["ram_role", "ram_policy"] if spec["ram"]["actions"] else ["ram_role"]
    if spec.get("ess"):
        blocks += ["ess_scaling_group", "ess_scaling_configuration", "ess_enable"]
    if spec.get("ack"):
        blocks += ["ack_cluster", "ack_node_pool"]
    if spec.get("fc"):
        blocks += ["fc_service", "fc_function"] + (["fc_trigger"] if spec["fc"]["http"] else [])
    if spec.get("kms"):
        blocks.append("kms_key")
    if spec.get("dns"):
        blocks.append("dns_record")
    if spec.get("sls"):
        blocks += ["sls_project", "sls_logstore"]
    assert all(block in RESOURCE_TYPES for block in blocks)
    return blocks


# ---------------------------------------------------------------- ROS rendering


def _ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def _att(resource: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [resource, attribute]}


def _ros_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


class _Ros:
    """Accumulates a ROS template's Parameters, Resources and Outputs."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.parameters: dict[str, Any] = {}
        self.resources: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}

    def add(self, name: str, block: str, properties: dict[str, Any], taggable: str | None = "list", **extra: Any) -> None:
        """Add a resource of catalog ``block``; tags go on taggable ones (list, or map for OSS/RDS)."""
        tags = self.spec["tags"]
        if tags and taggable == "list":
            properties["Tags"] = _ros_tags(tags)
        elif tags and taggable == "map":
            properties["Tags"] = dict(tags)
        self.resources[name] = {"Type": RESOURCE_TYPES[block][0], "Properties": properties, **extra}

    def output(self, name: str, description: str, value: Any) -> None:
        self.outputs[name] = {"Description": description, "Value": value}

    def password(self, name: str, description: str) -> dict[str, str]:
        """A NoEcho password parameter without a default (never bake secrets into templates)."""
        self.parameters[name] = {
            "Type": "String", "NoEcho": True, "Description": description, "MinLength": 8, "MaxLength": 30,
            "AllowedPattern": "[0-9A-Za-z\\_\\-\\&:;'<>,=%`~!@#\\(\\)\\$\\^\\*\\+\\|\\{\\}\\[\\]\\.\\?\\/]+$",
        }
        return _ref(name)

    def zone(self, index: int, vswitch: dict[str, Any]) -> dict[str, str]:
        name = f"ZoneId{index}"
        parameter: dict[str, Any] = {"Type": "String", "AssociationProperty": "ALIYUN::ECS::Instance::ZoneId",
                                     "Description": f"Zone of vSwitch {index}."}
        if vswitch["zone"]:
            parameter["Default"] = vswitch["zone"]
        self.parameters[name] = parameter
        return _ref(name)


def _ros_network(ros: _Ros) -> None:
    spec = ros.spec
    if spec["vpc"] and spec["vpc"].get("existing"):
        _ros_existing_network(ros)
    elif spec["vpc"]:
        ros.add("Vpc", "vpc", {"CidrBlock": spec["vpc"]["cidr"], "VpcName": spec["vpc"]["name"]})
        ros.output("VpcId", "ID of the VPC.", _att("Vpc", "VpcId"))
    for index, vswitch in enumerate(spec["vswitches"] if not (spec["vpc"] or {}).get("existing") else [], start=1):
        ros.add(f"VSwitch{index}", "vswitch", {"VpcId": _ref("Vpc"), "ZoneId": ros.zone(index, vswitch),
                                               "CidrBlock": vswitch["cidr"], "VSwitchName": f"iac-code-vsw-{index}"})
        ros.output(f"VSwitch{index}Id", f"ID of vSwitch {index}.", _att(f"VSwitch{index}", "VSwitchId"))
    if spec["security_group"]:
        ingress = [{"IpProtocol": rule["protocol"], "PortRange": rule["port_range"], "SourceCidrIp": rule["source"],
                    "Policy": "accept", "Priority": 1} for rule in spec["security_group"]["rules"]]
        properties: dict[str, Any] = {"VpcId": _ref("Vpc"), "SecurityGroupName": spec["security_group"]["name"]}
        if ingress:
            properties["SecurityGroupIngress"] = ingress
        ros.add("SecurityGroup", "security_group", properties)
        ros.output("SecurityGroupId", "ID of the security group.", _att("SecurityGroup", "SecurityGroupId"))


def _ros_existing_network(ros: _Ros) -> None:
    """An existing VPC: its id, its CIDR block (for allow-lists and rules) and one vSwitch per zone as parameters."""
    ros.parameters["VpcId"] = {"Type": "String", "AssociationProperty": "ALIYUN::ECS::VPC::VPCId",
                               "Description": "The existing VPC to deploy into."}
    ros.parameters["VpcCidrBlock"] = {"Type": "String", "Description": "CIDR block of that VPC (allow-lists and "
                                      "security group rules use it)."}
    for index, vswitch in enumerate(ros.spec["vswitches"], start=1):
        zone = ros.zone(index, vswitch)
        metadata: dict[str, Any] = {"VpcId": "${VpcId}"}
        if isinstance(zone, dict):
            metadata["ZoneId"] = "${" + zone["Ref"] + "}"
        ros.parameters[f"VSwitchId{index}"] = {
            "Type": "String", "AssociationProperty": "ALIYUN::VPC::VSwitch::VSwitchId",
            "AssociationPropertyMetadata": metadata, "Description": f"vSwitch {index} of the existing VPC."}


def _existing_references(node: Any, cidr: str) -> Any:
    """References to the network we did not create become its parameters (and its CIDR text the CIDR parameter)."""
    if isinstance(node, dict):
        if set(node) == {"Ref"} and isinstance(node["Ref"], str):
            ref = node["Ref"]
            if ref == "Vpc":
                return {"Ref": "VpcId"}
            if re.fullmatch(r"VSwitch\d+", ref):
                return {"Ref": "VSwitchId" + ref.removeprefix("VSwitch")}
        if set(node) == {"Fn::GetAtt"} and isinstance(node["Fn::GetAtt"], list) and len(node["Fn::GetAtt"]) == 2:
            name, attribute = node["Fn::GetAtt"]
            if name == "Vpc" and attribute == "VpcId":
                return {"Ref": "VpcId"}
            if isinstance(name, str) and re.fullmatch(r"VSwitch\d+", name) and attribute == "VSwitchId":
                return {"Ref": "VSwitchId" + name.removeprefix("VSwitch")}
        return {k: _existing_references(v, cidr) for k, v in node.items()}
    if isinstance(node, list):
        return [_existing_references(v, cidr) for v in node]
    if node == cidr:
        return {"Ref": "VpcCidrBlock"}
    return node


def _ros_ecs(ros: _Ros) -> None:
    ecs = ros.spec["ecs"]
    if not ecs:
        return
    password = ros.password("InstancePassword", "Login password of the ECS instances.")
    count = len(ros.spec["vswitches"])
    for index in range(1, ecs["count"] + 1):
        vsw = (index - 1) % count + 1
        properties: dict[str, Any] = {
            "InstanceName": instance_name(ecs, index), "ImageId": ecs["image"], "InstanceType": ecs["instance_type"],
            "VpcId": _ref("Vpc"), "VSwitchId": _ref(f"VSwitch{vsw}"), "ZoneId": _ref(f"ZoneId{vsw}"),
            "SecurityGroupId": _ref("SecurityGroup"), "SystemDiskCategory": ecs["system_disk_category"],
            "SystemDiskSize": ecs["system_disk"], "AllocatePublicIP": False, "Password": password,
        }
        if ecs["hostname"]:
            properties["HostName"] = ecs["hostname"] if ecs["count"] == 1 else f"{ecs['hostname']}{index}"
        if ecs["data_disk"]:
            properties["DiskMappings"] = [{"Category": ecs["data_disk_category"], "Size": ecs["data_disk"], "Encrypted": "true"}
                                          for _ in range(ecs["data_disk_count"])]
        if (ros.spec.get("ram") or {}).get("principal") == "ecs.aliyuncs.com":
            properties["RamRoleName"] = _att("Role", "RoleName")  # the instance role, attached
        ros.add(f"Instance{index}", "ecs_instance", properties)
        ros.output(f"Instance{index}Id", f"ID of ECS instance {index}.", _att(f"Instance{index}", "InstanceId"))
        ros.output(f"Instance{index}PrivateIp", f"Private IP of ECS instance {index}.", _att(f"Instance{index}", "PrivateIp"))


def instance_name(ecs: dict[str, Any], index: int) -> str:
    """The name of ECS instance ``index`` (1-based): the one asked for (numbered when there are several), or ours."""
    if not ecs["name"]:
        return f"iac-code-ecs-{index}"
    return ecs["name"] if ecs["count"] == 1 else f"{ecs['name']}-{index}"


def _ros_load_balancer(ros: _Ros) -> None:
    lb = ros.spec["load_balancer"]
    if not lb:
        return
    if lb["kind"] == "nlb":
        _ros_nlb(ros)
        return
    if lb["kind"] == "alb":
        mappings = _zone_mappings(ros.spec)
        ros.add("Alb", "alb", {"LoadBalancerName": lb["name"], "VpcId": _ref("Vpc"),
                               "AddressType": "Internet" if lb["public"] else "Intranet", "LoadBalancerEdition": "Standard",
                               "LoadBalancerBillingConfig": {"PayType": "PostPay"}, "ZoneMappings": mappings})
        ros.output("AlbId", "ID of the ALB instance.", _att("Alb", "LoadBalancerId"))
        ros.output("AlbDnsName", "DNS name of the ALB instance.", _att("Alb", "DNSName"))
        _ros_alb_backends(ros)
        return
    slb: dict[str, Any] = {"LoadBalancerName": lb["name"], "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"),
                           "AddressType": "internet" if lb["public"] else "intranet",
                           "LoadBalancerSpec": lb.get("spec") or "slb.s1.small"}
    if lb.get("bandwidth") and lb["public"]:
        slb.update({"InternetChargeType": "paybybandwidth", "Bandwidth": lb["bandwidth"]})
    ros.add("LoadBalancer", "slb", slb)
    ros.output("LoadBalancerId", "ID of the SLB instance.", _att("LoadBalancer", "LoadBalancerId"))
    ros.output("LoadBalancerAddress", "IP address of the SLB instance.", _att("LoadBalancer", "IpAddress"))
    _ros_slb_backends(ros)


def _ros_nlb(ros: _Ros) -> None:
    """An NLB across the vSwitches' zones, a TCP server group with health checks, a TCP listener on 80, the instances."""
    lb = ros.spec["load_balancer"]
    mappings = _zone_mappings(ros.spec)
    ros.add("Nlb", "nlb", {"LoadBalancerName": lb["name"], "VpcId": _ref("Vpc"), "AddressIpVersion": "ipv4",
                           "AddressType": "Internet" if lb["public"] else "Intranet", "ZoneMappings": mappings})
    ros.add("NlbServerGroup", "nlb_server_group", {"ServerGroupName": "iac-code-nlb-sg", "VpcId": _ref("Vpc"),
                                                   "Protocol": "TCP", "ServerGroupType": "Instance",
                                                   "HealthCheckConfig": {"HealthCheckEnabled": True}})
    group = _att("NlbServerGroup", "ServerGroupId")
    for number, (port, _) in enumerate(lb["ports"], start=1):
        ros.add("NlbListener" if number == 1 else f"NlbListener{port}", "nlb_listener", {
            "LoadBalancerId": _att("Nlb", "LoadBalancerId"), "ListenerProtocol": "TCP", "ListenerPort": port,
            "ServerGroupId": group}, taggable=None)
    if ros.spec["ecs"]:
        backend = lb["ports"][0][0]
        servers = [{"ServerId": _att(f"Instance{index}", "InstanceId"), "ServerType": "Ecs", "Port": backend, "Weight": 100}
                   for index in range(1, ros.spec["ecs"]["count"] + 1)]
        ros.add("NlbBackendServers", "nlb_backend", {"ServerGroupId": group, "Servers": servers}, taggable=None)
    ros.output("NlbId", "ID of the NLB instance.", _att("Nlb", "LoadBalancerId"))
    ros.output("NlbDnsName", "DNS name of the NLB instance.", _att("Nlb", "DNSName"))


def _ros_slb_backends(ros: _Ros) -> None:
    """SLB listeners forwarding to the same backend port, and every ECS instance attached as a backend server."""
    for port, protocol in ros.spec["load_balancer"]["ports"]:
        ros.add(f"LoadBalancerListener{port}", "slb_listener", {
            "LoadBalancerId": _att("LoadBalancer", "LoadBalancerId"), "ListenerPort": port, "BackendServerPort": port,
            "Protocol": protocol, "Bandwidth": -1}, taggable=None)
    if ros.spec["ecs"]:
        servers = [{"ServerId": _att(f"Instance{index}", "InstanceId"), "Weight": 100}
                   for index in range(1, ros.spec["ecs"]["count"] + 1)]
        ros.add("LoadBalancerBackendServers", "slb_backend", {"LoadBalancerId": _att("LoadBalancer", "LoadBalancerId"),
                                                              "BackendServers": servers}, taggable=None)


def _ros_alb_backends(ros: _Ros) -> None:
    """An HTTP server group with health checks, an HTTP listener on 80 forwarding to it, and the ECS instances in it."""
    ros.add("AlbServerGroup", "alb_server_group", {"ServerGroupName": "iac-code-alb-sg", "VpcId": _ref("Vpc"),
                                                   "Protocol": "HTTP", "HealthCheckConfig": {"HealthCheckEnabled": True}})
    group = _att("AlbServerGroup", "ServerGroupId")
    ports = ros.spec["load_balancer"]["ports"]
    for number, (port, _) in enumerate(ports, start=1):
        ros.add("AlbListener" if number == 1 else f"AlbListener{port}", "alb_listener", {
            "LoadBalancerId": _att("Alb", "LoadBalancerId"), "ListenerPort": port, "ListenerProtocol": "HTTP",
            "DefaultActions": [{"Type": "ForwardGroup",
                                "ForwardGroupConfig": {"ServerGroupTuples": [{"ServerGroupId": group}]}}],
        }, taggable=None)
    if ros.spec["ecs"]:
        servers = [{"ServerId": _att(f"Instance{index}", "InstanceId"), "ServerType": "Ecs", "Port": ports[0][0],
                    "Weight": 100}
                   for index in range(1, ros.spec["ecs"]["count"] + 1)]
        ros.add("AlbBackendServers", "alb_backend", {"ServerGroupId": group, "Servers": servers}, taggable=None)


def eip_names(count: int) -> list[str]:
    """Logical names of the EIPs: "Eip", then "Eip2", "Eip3"... (the first keeps its name for references to it)."""
    return ["Eip" if index == 1 else f"Eip{index}" for index in range(1, count + 1)]


def _ros_nat(ros: _Ros) -> None:
    spec = ros.spec
    eip = spec["eip"]
    if not eip:
        return
    names = eip_names(eip["count"])
    for index, name in enumerate(names, start=1):
        ros.add(name, "eip", {"Name": "iac-code-eip" if index == 1 else f"iac-code-eip-{index}", "Bandwidth": eip["bandwidth"],
                              "InternetChargeType": "PayByTraffic"})
        ros.output(f"{name}Address", f"Public IP address of EIP {index}.", _att(name, "EipAddress"))
    if not spec["nat"]:
        instances = spec["ecs"]["count"] if spec["ecs"] else 0
        for index, name in enumerate(names[:instances], start=1):
            ros.add(name.replace("Eip", "EipAssociation"), "eip_association", {
                "AllocationId": _att(name, "AllocationId"), "InstanceId": _att(f"Instance{index}", "InstanceId")},
                taggable=None)
        return
    ros.add("NatGateway", "nat_gateway", {"NatGatewayName": "iac-code-nat", "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"),
                                          "NatType": "Enhanced", "InternetChargeType": "PayByLcu"})
    for name in names:
        ros.add(name.replace("Eip", "EipAssociation"), "eip_association", {
            "AllocationId": _att(name, "AllocationId"), "InstanceId": _att("NatGateway", "NatGatewayId")}, taggable=None)
    for index in range(1, len(spec["vswitches"]) + 1):
        ros.add(f"SnatEntry{index}", "snat_entry", {"SnatTableId": _att("NatGateway", "SNatTableId"),
                                                    "SnatIp": _att("Eip", "EipAddress"),
                                                    "SourceVSwitchIds": [_ref(f"VSwitch{index}")]},
                taggable=None, DependsOn=["EipAssociation"])
    ros.output("NatGatewayId", "ID of the NAT gateway.", _att("NatGateway", "NatGatewayId"))


def _ros_data(ros: _Ros) -> None:
    spec = ros.spec
    if spec["rds"]:
        rds = spec["rds"]
        ros.add("Database", "rds", {
            "Engine": rds["engine"], "EngineVersion": rds["version"], "DBInstanceClass": rds["class"],
            "DBInstanceStorage": rds["storage"], "DBInstanceStorageType": "cloud_essd", "DBInstanceNetType": "Intranet",
            "SecurityIPList": rds.get("whitelist") or spec["vpc"]["cidr"], "VpcId": _ref("Vpc"),
            "VSwitchId": _ref("VSwitch1"), "ZoneId": _ref("ZoneId1"), "PayType": "Postpaid",
            "DBInstanceDescription": rds["name"], "DeletionProtection": True,
            **({"SlaveZoneIds": [_ref("ZoneId2")], "Category": "HighAvailability"} if rds.get("ha") else {}),
            **({"BackupRetentionPeriod": rds["backup_days"]} if rds.get("backup_days") else {}),
        }, taggable="map")
        if rds.get("account"):
            password = ros.password("DBAccountPassword", f"Password of the database account {rds['account']}.")
            ros.add("DatabaseAccount", "rds_account", {
                "DBInstanceId": _att("Database", "DBInstanceId"), "AccountName": rds["account"],
                "AccountPassword": password, "AccountType": "Normal"}, taggable=None)
            ros.output("DBAccountName", "Name of the database account.", rds["account"])
        ros.output("DBInstanceId", "ID of the RDS instance.", _att("Database", "DBInstanceId"))
        ros.output("DBConnectionString", "Internal connection string of the RDS instance.",
                   _att("Database", "InnerConnectionString"))
    if spec["redis"]:
        redis = spec["redis"]
        password = ros.password("RedisPassword", "Password of the Redis instance.")
        ros.add("Redis", "redis", {"InstanceName": redis["name"], "InstanceClass": redis["class"],
                                   "EngineVersion": redis["version"], "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"),
                                   "ZoneId": _ref("ZoneId1"), "Password": password})
        ros.add("RedisWhitelist", "redis_whitelist",
                {"InstanceId": _ref("Redis"), "SecurityIps": redis.get("whitelist") or spec["vpc"]["cidr"]}, taggable=None)
        ros.output("RedisInstanceId", "ID of the Redis instance.", _att("Redis", "InstanceId"))
        ros.output("RedisConnectionDomain", "Connection domain of the Redis instance.", _att("Redis", "ConnectionDomain"))
    if spec["oss"]:
        oss = spec["oss"]
        encryption: dict[str, Any] = {"SSEAlgorithm": oss["encryption"]}
        bucket: dict[str, Any] = {"BucketName": oss["name"], "AccessControl": oss["acl"],
                                  "ServerSideEncryptionConfiguration": encryption}
        if oss.get("versioning"):
            bucket["VersioningConfiguration"] = {"Status": "Enabled"}
        if oss.get("storage_class"):
            bucket["StorageClass"] = oss["storage_class"]
        if oss.get("expire_days"):
            bucket["LifecycleConfiguration"] = {"Rule": [{"ID": "expire-objects", "Prefix": "", "Status": "Enabled",
                                                          "Expiration": {"Days": oss["expire_days"]}}]}
        ros.add("Bucket", "oss_bucket", bucket, taggable="map")
        ros.output("BucketName", "Name of the OSS bucket.", _att("Bucket", "Name"))
        ros.output("BucketDomainName", "Domain name of the OSS bucket.", _att("Bucket", "DomainName"))


def describe(spec: dict[str, Any]) -> str:
    """One English sentence describing what a (resolved) spec builds."""
    parts: list[str] = []
    if spec["vpc"] and spec["vpc"].get("existing"):
        parts.append("resources in an existing VPC (its ids as parameters)")
    elif spec["vpc"]:
        parts.append(f"a VPC ({spec['vpc']['cidr']})")
    count = len(spec["vswitches"])
    if count and not (spec["vpc"] or {}).get("existing"):
        parts.append(f"{count} vSwitch{'es' if count != 1 else ''}")
    if spec["security_group"]:
        ports = ", ".join(rule["port_range"].split("/")[0] for rule in spec["security_group"]["rules"])
        parts.append("a security group" + (f" (ports {ports})" if ports else ""))
    if spec["ecs"]:
        ecs = spec["ecs"]
        parts.append(f"{ecs['count']} ECS instance{'s' if ecs['count'] != 1 else ''} ({ecs['instance_type']})")
    if spec["load_balancer"]:
        parts.append(f"an {spec['load_balancer']['kind'].upper()}")
    if spec["nat"]:
        parts.append("a NAT gateway with an EIP and SNAT")
    elif spec["eip"]:
        parts.append("an EIP")
    if spec["rds"]:
        parts.append(f"an RDS {spec['rds']['engine']} {spec['rds']['version']} instance")
    if spec["redis"]:
        parts.append(f"a Redis {spec['redis']['version']} instance")
    if spec["oss"]:
        parts.append(f"an OSS bucket ({spec['oss']['acl']})")
    if spec.get("mongodb"):
        parts.append(f"a MongoDB {spec['mongodb']['version']} instance")
    if spec.get("polardb"):
        parts.append(f"a PolarDB {spec['polardb']['engine']} {spec['polardb']['version']} cluster")
    if spec.get("nas"):
        parts.append(f"a NAS {spec['nas']['protocol']} file system with a mount target")
    if spec.get("ess"):
        parts.append(f"an auto scaling group of {spec['ess']['min']} to {spec['ess']['max']} instances "
                     f"({spec['ess']['instance_type']})")
    if spec.get("ack"):
        parts.append(f"an ACK managed Kubernetes cluster with a {spec['ack']['nodes']}-node pool")
    if spec.get("fc"):
        parts.append(f"a Function Compute function ({spec['fc']['runtime']})"
                     + (" with an HTTP trigger" if spec["fc"]["http"] else ""))
    if spec.get("ram"):
        parts.append(f"a RAM role for {spec['ram']['principal']}" + (" with a policy" if spec["ram"]["actions"] else ""))
    if spec.get("kms"):
        parts.append("a KMS key with automatic rotation")
    if spec.get("dns"):
        parts.append(f"a DNS {spec['dns']['type']} record for {spec['dns']['name']}")
    if spec.get("sls"):
        parts.append(f"a Log Service project with a logstore ({spec['sls']['ttl']} days)")
    if not parts:
        return "Nothing could be generated from the request."
    listing = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    where = f" in {spec['region']}" if spec["region"] else ""
    kind = {"terraform": "Terraform configuration", "ros-json": "ROS template (JSON)", "ros-yaml": "ROS template (YAML)"}
    return f"Generated a {kind[spec['format']]} with {listing}{where}."


def _ros_databases(ros: _Ros) -> None:
    """MongoDB and PolarDB inside the VPC, reachable from the VPC only; passwords as NoEcho parameters."""
    spec = ros.spec
    if spec.get("mongodb"):
        mongo = spec["mongodb"]
        password = ros.password("MongoDBPassword", "Password of the MongoDB root account.")
        ros.add("MongoDB", "mongodb", {
            "EngineVersion": mongo["version"], "DBInstanceClass": mongo["class"], "DBInstanceStorage": mongo["storage"],
            "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"), "ZoneId": _ref("ZoneId1"), "AccountPassword": password,
            "SecurityIPArray": mongo.get("whitelist") or spec["vpc"]["cidr"], "DBInstanceDescription": mongo["name"]},
            taggable="list")
        ros.output("MongoDBInstanceId", "ID of the MongoDB instance.", _att("MongoDB", "DBInstanceId"))
    if spec.get("polardb"):
        polar = spec["polardb"]
        ros.add("PolarDB", "polardb", {
            "DBType": polar["engine"], "DBVersion": polar["version"], "DBNodeClass": polar["class"], "PayType": "Postpaid",
            "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"), "ZoneId": _ref("ZoneId1"),
            "SecurityIPList": polar.get("whitelist") or spec["vpc"]["cidr"], "DBClusterDescription": polar["name"]},
            taggable="list")
        ros.output("PolarDBClusterId", "ID of the PolarDB cluster.", _att("PolarDB", "DBClusterId"))
        ros.output("PolarDBConnectionString", "Connection string of the PolarDB cluster.",
                   _att("PolarDB", "ClusterConnectionString"))


def _ros_nas(ros: _Ros) -> None:
    """A NAS file system (encrypted) and its mount target in the first vSwitch, for the VPC's default access group."""
    nas = ros.spec.get("nas")
    if not nas:
        return
    ros.add("FileSystem", "nas_file_system", {"ProtocolType": nas["protocol"], "StorageType": nas["storage"],
                                              "FileSystemType": "standard", "EncryptType": 1,
                                              "Description": nas["name"]}, taggable="list")
    ros.add("MountTarget", "nas_mount_target", {"FileSystemId": _ref("FileSystem"), "NetworkType": "Vpc",
                                                "VpcId": _ref("Vpc"), "VSwitchId": _ref("VSwitch1"),
                                                "AccessGroupName": "DEFAULT_VPC_GROUP_NAME"}, taggable=None)
    ros.output("FileSystemId", "ID of the NAS file system.", _ref("FileSystem"))
    ros.output("MountTargetDomain", "Domain to mount the file system from.", _att("MountTarget", "MountTargetDomain"))


def _zone_mappings(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """ALB/NLB ZoneMappings: each vSwitch with its zone."""
    return [{"ZoneId": _ref(f"ZoneId{index}"), "VSwitchId": _ref(f"VSwitch{index}")}
            for index in range(1, len(spec["vswitches"]) + 1)]


def _vswitch_refs(spec: dict[str, Any]) -> list[dict[str, str]]:
    """A Ref to each of the template's vSwitches, in order (multi-zone resources span them all)."""
    return [_ref(f"VSwitch{index}") for index in range(1, len(spec["vswitches"]) + 1)]


def _ros_ess(ros: _Ros) -> None:
    """An auto scaling group over every vSwitch (behind the template's SLB), its configuration, and its activation."""
    spec = ros.spec
    ess = spec.get("ess")
    if not ess:
        return
    group: dict[str, Any] = {"ScalingGroupName": ess["name"], "MinSize": ess["min"], "MaxSize": ess["max"],
                             "VSwitchIds": _vswitch_refs(spec),
                             "MultiAZPolicy": "BALANCE", "RemovalPolicys": ["OldestInstance", "NewestInstance"]}
    if spec["load_balancer"] and spec["load_balancer"]["kind"] == "slb":
        group["LoadBalancerIds"] = [_att("LoadBalancer", "LoadBalancerId")]
    ros.add("ScalingGroup", "ess_scaling_group", group, taggable="list")
    ros.add("ScalingConfiguration", "ess_scaling_configuration", {
        "ScalingGroupId": _att("ScalingGroup", "ScalingGroupId"), "ImageId": ess["image"],
        "InstanceType": ess["instance_type"], "SecurityGroupId": _ref("SecurityGroup"), "SystemDiskCategory": "cloud_essd",
        "SystemDiskSize": ess["system_disk"], "InternetMaxBandwidthOut": 0}, taggable=None)
    ros.add("ScalingGroupEnable", "ess_enable", {
        "ScalingGroupId": _att("ScalingGroup", "ScalingGroupId"),
        "ScalingConfigurationId": _att("ScalingConfiguration", "ScalingConfigurationId")}, taggable=None)
    ros.output("ScalingGroupId", "ID of the auto scaling group.", _att("ScalingGroup", "ScalingGroupId"))


def _ros_ack(ros: _Ros) -> None:
    """An ACK Pro managed cluster over every vSwitch (NAT for the nodes, private API unless asked) and a node pool."""
    spec = ros.spec
    ack = spec.get("ack")
    if not ack:
        return
    vswitches = _vswitch_refs(spec)
    cluster: dict[str, Any] = {"Name": ack["name"], "ClusterSpec": "ack.pro.small", "VpcId": _ref("Vpc"),
                               "VSwitchIds": vswitches, "ContainerCidr": ack["pod_cidr"], "ServiceCidr": ack["service_cidr"],
                               "SnatEntry": True, "EndpointPublicAccess": ack["public_api"]}
    if ack["version"]:
        cluster["KubernetesVersion"] = ack["version"]
    ros.add("Cluster", "ack_cluster", cluster, taggable="list")
    ros.add("NodePool", "ack_node_pool", {
        "ClusterId": _ref("Cluster"), "NodePoolInfo": {"Name": "default-pool"},
        "ScalingGroup": {"VSwitchIds": vswitches, "InstanceTypes": [ack["node_type"]], "SystemDiskCategory": "cloud_essd",
                         "SystemDiskSize": 120, "DesiredSize": ack["nodes"]},
        "KubernetesConfig": {"Runtime": "containerd"}}, taggable=None)
    ros.output("ClusterId", "ID of the ACK cluster.", _ref("Cluster"))


def _ros_fc(ros: _Ros) -> None:
    """A Function Compute service and function (code from OSS, as parameters) and an HTTP trigger.

    The service logs to the template's logstore and runs with its RAM role when the template has them.
    """
    spec = ros.spec
    fc = spec.get("fc")
    if not fc:
        return
    service: dict[str, Any] = {"ServiceName": fc["service"], "Description": "iac-code service"}
    if (spec.get("ram") or {}).get("principal") == "fc.aliyuncs.com":
        service["Role"] = _att("Role", "Arn")
    if spec.get("sls"):
        service["LogConfig"] = {"Project": _att("LogProject", "Name"), "Logstore": _att("Logstore", "LogstoreName")}
    ros.add("FcService", "fc_service", service, taggable="list")
    ros.parameters["FunctionCodeBucket"] = {"Type": "String", "Description": "OSS bucket holding the function's code."}
    ros.parameters["FunctionCodeObject"] = {"Type": "String", "Description": "OSS object (a zip) of the function's code."}
    ros.add("FcFunction", "fc_function", {
        "ServiceName": _att("FcService", "ServiceName"), "FunctionName": fc["function"], "Runtime": fc["runtime"],
        "Handler": "index.handler", "MemorySize": fc["memory"], "Timeout": fc["timeout"],
        "Code": {"OssBucketName": _ref("FunctionCodeBucket"), "OssObjectName": _ref("FunctionCodeObject")}}, taggable=None)
    ros.output("FunctionArn", "ARN of the function.", _att("FcFunction", "ARN"))
    if fc["http"]:
        ros.add("FcHttpTrigger", "fc_trigger", {
            "ServiceName": _att("FcService", "ServiceName"), "FunctionName": _att("FcFunction", "FunctionName"),
            "TriggerName": "http", "TriggerType": "http",
            "TriggerConfig": {"AuthType": "anonymous" if fc["anonymous"] else "function", "Methods": ["GET", "POST"]}},
            taggable=None)


def _ros_services(ros: _Ros) -> None:
    """Services outside the VPC: a RAM role, a KMS key, a Log Service project with its logstore, a DNS record."""
    spec = ros.spec
    if spec.get("ram"):
        ram = spec["ram"]
        trust, policy = ram_documents(ram)
        ros.add("Role", "ram_role", {"RoleName": ram["name"], "AssumeRolePolicyDocument": trust,
                                     "Description": "iac-code role"}, taggable=None)
        ros.output("RoleArn", "ARN of the RAM role.", _att("Role", "Arn"))
        if policy is not None:
            ros.add("RolePolicy", "ram_policy", {"PolicyName": f"{ram['name']}-policy", "PolicyDocument": policy,
                                                 "Roles": [_att("Role", "RoleName")]}, taggable=None)
    if spec.get("kms"):
        ros.add("Key", "kms_key", {"Description": "iac-code key", "KeyUsage": "ENCRYPT/DECRYPT",
                                   "EnableAutomaticRotation": True, "RotationInterval": f"{spec['kms']['rotation_days']}d",
                                   "PendingWindowInDays": 7})
        ros.output("KeyId", "ID of the KMS key.", _att("Key", "KeyId"))
    if spec.get("sls"):
        sls = spec["sls"]
        ros.add("LogProject", "sls_project", {"Name": sls["project"], "Description": "iac-code logs"})
        ros.add("Logstore", "sls_logstore", {"ProjectName": _att("LogProject", "Name"), "LogstoreName": sls["logstore"],
                                             "TTL": sls["ttl"], "ShardCount": sls["shards"]}, taggable=None)
        ros.output("LogProjectName", "Name of the Log Service project.", _att("LogProject", "Name"))
        ros.output("LogstoreName", "Name of the logstore.", _att("Logstore", "LogstoreName"))
    if spec.get("dns"):
        dns = spec["dns"]
        rr, domain = split_domain(dns["name"])
        value: Any = dns["value"]
        if value == "@load_balancer":
            kind = spec["load_balancer"]["kind"]
            value = (_att("Alb", "DNSName") if kind == "alb" else _att("Nlb", "DNSName") if kind == "nlb"
                     else _att("LoadBalancer", "IpAddress"))
        elif value == "@eip":
            value = _att("Eip", "EipAddress")
        elif value == "@parameter":  # nothing in the template to point at, and no address given: ask at deploy time
            ros.parameters["DnsRecordValue"] = {"Type": "String", "Description": f"Value of the {dns['type']} record "
                                                f"{dns['name']} (an IP address or a host name)."}
            value = _ref("DnsRecordValue")
        ros.add("DnsRecord", "dns_record", {"DomainName": domain, "RR": rr, "Type": dns["type"], "Value": value,
                                            "TTL": dns["ttl"]}, taggable=None)
        ros.output("DnsRecordId", "ID of the DNS record.", _att("DnsRecord", "RecordId"))


def render_ros(spec: dict[str, Any]) -> dict[str, Any]:
    """The ROS template dict for a resolved spec."""
    ros = _Ros(spec)
    _ros_network(ros)
    _ros_ecs(ros)
    _ros_load_balancer(ros)
    _ros_nat(ros)
    _ros_data(ros)
    _ros_databases(ros)
    _ros_nas(ros)
    _ros_services(ros)
    _ros_fc(ros)
    _ros_ack(ros)
    _ros_ess(ros)
    template: dict[str, Any] = {"ROSTemplateFormatVersion": ROS_TEMPLATE_VERSION, "Description": describe(spec)}
    if ros.parameters:
        template["Parameters"] = ros.parameters
    template["Resources"] = ros.resources
    if ros.outputs:
        template["Outputs"] = ros.outputs
    if spec["vpc"] and spec["vpc"].get("existing"):
        template["Resources"] = _existing_references(template["Resources"], spec["vpc"]["cidr"])
        if "Outputs" in template:
            template["Outputs"] = _existing_references(template["Outputs"], spec["vpc"]["cidr"])
    return template


# ---------------------------------------------------------------- public API

def render(spec: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """(text, ROS template or None) for a spec in its chosen format."""
    resolved = resolve(spec)
    if spec["format"] == "terraform":
        return render_terraform(resolved, building_blocks(resolved)), None
    template = render_ros(resolved)
    if spec["format"] == "ros-json":
        return json.dumps(template, indent=2, ensure_ascii=False) + "\n", template
    return yaml.dump(template, Dumper=_DUMPER, sort_keys=False, allow_unicode=True), template


def generate(prompt: str, previous: dict[str, Any] | None = None) -> GenerationResult:
    """Build (or, with ``previous``, edit) a template from a natural-language request."""
    delta = parse_request(prompt, previous)
    spec = apply_delta(previous, delta)
    text, template = render(spec)
    resolved = resolve(spec)
    summary = describe(resolved)
    unmapped = list(delta["unmapped"]) + _not_expressible(spec)
    if building_blocks(resolved):
        unmapped += [f"{value} (stated, but not used)" for value in stated_values(prompt)
                     if value.lower() not in text.lower() and value.lower() not in summary.lower()
                     and not any(value.lower() in entry.lower() for entry in unmapped)]
    return GenerationResult(spec=spec, format=spec["format"], text=text, file_name=FORMATS[spec["format"]], template=template,
                            resources=building_blocks(resolved), unmapped=unmapped, summary=summary)


def _not_expressible(spec: dict[str, Any]) -> list[str]:
    """Settings the spec holds that the chosen format has no place for, named so the reply says they were not used."""
    notes: list[str] = []
    backup = (spec["rds"] or {}).get("backup_days")
    if spec["format"] == "terraform" and backup:
        notes.append(f"backup retention of {backup} days (alicloud_db_instance has no argument for it; "
                     "set it with a backup policy)")
    return notes
