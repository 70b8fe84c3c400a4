"""Render a resolved generation spec (see ``generation.resolve``) as Terraform HCL for the alicloud provider.

A tiny HCL writer (attributes, nested blocks, raw expressions) is enough for the fixed shapes the
engine emits, and keeps generation free of extra dependencies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from iac_code_runtime_offline.engine.catalog import RESOURCE_TYPES, TERRAFORM_PROVIDER_VERSION


@dataclass(frozen=True)
class Expr:
    """A raw HCL expression (a reference or function call), written unquoted."""

    text: str


@dataclass(frozen=True)
class Block:
    """A nested HCL block such as ``data_disks { ... }``."""

    body: list[tuple[str, Any]]


def _value(value: Any, indent: int) -> str:
    """HCL text of an attribute value."""
    if isinstance(value, Expr):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("${", "$${")
    if isinstance(value, list):
        return "[" + ", ".join(_value(item, indent) for item in value) + "]"
    if isinstance(value, dict):
        pad = "  " * (indent + 1)
        lines = [f"{pad}{json.dumps(key) if not key.isidentifier() else key} = {_value(item, indent + 1)}"
                 for key, item in value.items()]
        return "{\n" + "\n".join(lines) + "\n" + "  " * indent + "}"
    raise TypeError(f"cannot render {value!r} as HCL")


def _body(items: list[tuple[str, Any]], indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    for key, value in items:
        if isinstance(value, Block):
            lines.append(f"{pad}{key} {{")
            lines += _body(value.body, indent + 1)
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{key} = {_value(value, indent)}")
    return lines


def _top(kind: str, labels: list[str], body: list[tuple[str, Any]]) -> str:
    head = " ".join([kind] + [json.dumps(label) for label in labels])
    return "\n".join([f"{head} {{", *_body(body, 1), "}"])


def _tf(block: str) -> str:
    return RESOURCE_TYPES[block][1]


class _Tf:
    """Accumulates top-level HCL blocks."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.blocks: list[str] = []
        self.outputs: list[str] = []

    def resource(self, block: str, name: str, body: list[tuple[str, Any]], taggable: bool = True) -> None:
        if taggable and self.spec["tags"]:
            body = body + [("tags", dict(self.spec["tags"]))]
        self.blocks.append(_top("resource", [_tf(block), name], body))

    def output(self, name: str, description: str, value: str) -> None:
        self.outputs.append(_top("output", [name], [("description", description), ("value", Expr(value))]))

    def password(self, name: str, description: str) -> Expr:
        """A sensitive variable without a default (never bake secrets into code)."""
        self.blocks.append(_top("variable", [name], [("description", description), ("type", Expr("string")),
                                                      ("sensitive", True)]))
        return Expr(f"var.{name}")


def _zone(spec: dict[str, Any], index: int) -> Any:
    """The zone of vSwitch ``index`` (0-based): the one asked for, else one from the zones data source."""
    zone = spec["vswitches"][index]["zone"]
    return zone if zone else Expr(f"data.alicloud_zones.default.zones[{index}].id")


def _network(tf: _Tf) -> None:
    spec = tf.spec
    if spec["vpc"] and spec["vpc"].get("existing"):
        for name, kind, description in (
                ("vpc_id", "string", "The existing VPC to deploy into."),
                ("vpc_cidr_block", "string", "CIDR block of that VPC (allow-lists and security group rules use it)."),
                ("vswitch_ids", "list(string)", "vSwitches of that VPC, one per zone used."),
                ("zone_ids", "list(string)", "The zones of those vSwitches, in the same order.")):
            tf.blocks.append(_top("variable", [name], [("description", description), ("type", Expr(kind))]))
    elif spec["vpc"]:
        tf.resource("vpc", "vpc", [("vpc_name", spec["vpc"]["name"]), ("cidr_block", spec["vpc"]["cidr"])])
        tf.output("vpc_id", "ID of the VPC.", "alicloud_vpc.vpc.id")
    if spec["vpc"] and spec["vpc"].get("existing"):
        pass
    elif any(not vswitch["zone"] for vswitch in spec["vswitches"]):
        tf.blocks.append(_top("data", ["alicloud_zones", "default"], [("available_resource_creation", "VSwitch")]))
    for index, vswitch in enumerate(spec["vswitches"] if not (spec["vpc"] or {}).get("existing") else []):
        name = f"vsw{index + 1}"
        tf.resource("vswitch", name, [("vswitch_name", f"iac-code-vsw-{index + 1}"), ("vpc_id", Expr("alicloud_vpc.vpc.id")),
                                      ("cidr_block", vswitch["cidr"]), ("zone_id", _zone(spec, index))])
        tf.output(f"vswitch{index + 1}_id", f"ID of vSwitch {index + 1}.", f"alicloud_vswitch.{name}.id")
    if spec["security_group"]:
        tf.resource("security_group", "sg", [("security_group_name", spec["security_group"]["name"]),
                                             ("vpc_id", Expr("alicloud_vpc.vpc.id"))])
        tf.output("security_group_id", "ID of the security group.", "alicloud_security_group.sg.id")
        for index, rule in enumerate(spec["security_group"]["rules"], start=1):
            tf.resource("security_group_ingress", f"rule{index}", [
                ("type", "ingress"), ("ip_protocol", rule["protocol"]), ("port_range", rule["port_range"]),
                ("cidr_ip", rule["source"]), ("policy", "accept"), ("priority", 1),
                ("security_group_id", Expr("alicloud_security_group.sg.id"))], taggable=False)


def _vswitch_ids(spec: dict[str, Any]) -> str:
    return "[" + ", ".join(f"alicloud_vswitch.vsw{index}.id" for index in range(1, len(spec["vswitches"]) + 1)) + "]"


def _ecs(tf: _Tf) -> None:
    ecs = tf.spec["ecs"]
    if not ecs:
        return
    password = tf.password("instance_password", "Login password of the ECS instances.")
    name = ecs["name"] or "iac-code-ecs"
    body: list[tuple[str, Any]] = [
        ("count", ecs["count"]),
        ("instance_name", name if ecs["name"] and ecs["count"] == 1 else Expr(f'"{name}-${{count.index + 1}}"')),
        ("image_id", ecs["image"]),
        ("instance_type", ecs["instance_type"]), ("vswitch_id", Expr(f"element({_vswitch_ids(tf.spec)}, count.index)")),
        ("security_groups", [Expr("alicloud_security_group.sg.id")]), ("system_disk_category", ecs["system_disk_category"]),
        ("system_disk_size", ecs["system_disk"]), ("internet_max_bandwidth_out", 0), ("password", password),
    ]
    if ecs["hostname"]:
        body.append(("host_name", ecs["hostname"] if ecs["count"] == 1 else Expr(f'"{ecs["hostname"]}${{count.index + 1}}"')))
    for _ in range(ecs["data_disk_count"] if ecs["data_disk"] else 0):
        body.append(("data_disks", Block([("category", ecs["data_disk_category"]), ("size", ecs["data_disk"]),
                                          ("encrypted", True)])))
    if (tf.spec.get("ram") or {}).get("principal") == "ecs.aliyuncs.com":
        body.append(("role_name", Expr("alicloud_ram_role.role.role_name")))
    tf.resource("ecs_instance", "ecs", body)
    tf.output("instance_ids", "IDs of the ECS instances.", "alicloud_instance.ecs[*].id")
    tf.output("instance_private_ips", "Private IPs of the ECS instances.", "alicloud_instance.ecs[*].private_ip")


_HTTP_PORTS = (80, 8000, 8080, 8888)


def listener_ports(spec: dict[str, Any]) -> list[tuple[int, str]]:
    """(port, protocol) of the load balancer listeners, for ROS and Terraform alike.

    The ports asked for (HTTP on the usual web ports, else TCP; an NLB's are TCP); without any, HTTP on 80,
    plus (SLB only) TCP on 443 when the security group opens 443.
    """
    lb = spec["load_balancer"]
    if lb.get("listeners"):
        return [(port, "tcp" if lb["kind"] == "nlb" or port not in _HTTP_PORTS else "http") for port in lb["listeners"]]
    ports = [(80, "tcp" if lb["kind"] == "nlb" else "http")]
    rules = spec["security_group"]["rules"] if spec["security_group"] else []
    if lb["kind"] == "slb" and any(rule["port_range"] == "443/443" for rule in rules):
        ports.append((443, "tcp"))
    return ports


def _load_balancer(tf: _Tf) -> None:
    lb = tf.spec["load_balancer"]
    if not lb:
        return
    if lb["kind"] == "nlb":
        _nlb(tf)
        return
    if lb["kind"] == "alb":
        body: list[tuple[str, Any]] = [
            ("load_balancer_name", lb["name"]), ("vpc_id", Expr("alicloud_vpc.vpc.id")),
            ("address_type", "Internet" if lb["public"] else "Intranet"), ("load_balancer_edition", "Standard"),
            ("load_balancer_billing_config", Block([("pay_type", "PayAsYouGo")])),
        ]
        for index in range(len(tf.spec["vswitches"])):
            body.append(("zone_mappings", Block([("vswitch_id", Expr(f"alicloud_vswitch.vsw{index + 1}.id")),
                                                 ("zone_id", Expr(f"alicloud_vswitch.vsw{index + 1}.zone_id"))])))
        tf.resource("alb", "alb", body)
        tf.output("alb_id", "ID of the ALB instance.", "alicloud_alb_load_balancer.alb.id")
        tf.output("alb_dns_name", "DNS name of the ALB instance.", "alicloud_alb_load_balancer.alb.dns_name")
        _alb_backends(tf)
        return
    address_type = "internet" if lb["public"] else "intranet"
    body = [("load_balancer_name", lb["name"]), ("address_type", address_type),
            ("load_balancer_spec", lb.get("spec") or "slb.s1.small"), ("vswitch_id", Expr("alicloud_vswitch.vsw1.id"))]
    if lb.get("bandwidth") and lb["public"]:
        body += [("internet_charge_type", "PayByBandwidth"), ("bandwidth", lb["bandwidth"])]
    tf.resource("slb", "slb", body)
    tf.output("slb_id", "ID of the SLB instance.", "alicloud_slb_load_balancer.slb.id")
    tf.output("slb_address", "IP address of the SLB instance.", "alicloud_slb_load_balancer.slb.address")
    _slb_backends(tf)


def _nlb(tf: _Tf) -> None:
    """An NLB across every vSwitch's zone, a TCP server group, a TCP listener on 80 and one attachment per instance."""
    spec = tf.spec
    zones = [("zone_mappings", Block([("vswitch_id", Expr(f"alicloud_vswitch.vsw{i}.id")),
                                      ("zone_id", Expr(f"alicloud_vswitch.vsw{i}.zone_id"))]))
             for i in range(1, len(spec["vswitches"]) + 1)]
    tf.resource("nlb", "nlb", [("load_balancer_name", spec["load_balancer"]["name"]), ("load_balancer_type", "Network"),
                               ("address_type", "Internet" if spec["load_balancer"]["public"] else "Intranet"),
                               ("address_ip_version", "Ipv4"), ("vpc_id", Expr("alicloud_vpc.vpc.id")), *zones])
    tf.resource("nlb_server_group", "nlb", [("server_group_name", "iac-code-nlb-sg"), ("server_group_type", "Instance"),
                                            ("vpc_id", Expr("alicloud_vpc.vpc.id")), ("protocol", "TCP"),
                                            ("health_check", Block([("health_check_enabled", True)]))])
    ports = spec["load_balancer"]["ports"]
    for port, _ in ports:
        tf.resource("nlb_listener", f"nlb_{port}", [("listener_protocol", "TCP"), ("listener_port", port),
                                                    ("load_balancer_id", Expr("alicloud_nlb_load_balancer.nlb.id")),
                                                    ("server_group_id", Expr("alicloud_nlb_server_group.nlb.id"))],
                    taggable=False)
    for index, server in enumerate(_instance_ids(spec), start=1):
        tf.resource("nlb_backend", f"nlb_{index}", [("server_group_id", Expr("alicloud_nlb_server_group.nlb.id")),
                                                    ("server_id", server), ("server_type", "Ecs"), ("port", ports[0][0]),
                                                    ("weight", 100)], taggable=False)
    tf.output("nlb_id", "ID of the NLB instance.", "alicloud_nlb_load_balancer.nlb.id")
    tf.output("nlb_dns_name", "DNS name of the NLB instance.", "alicloud_nlb_load_balancer.nlb.dns_name")


def _instance_ids(spec: dict[str, Any]) -> list[Expr]:
    return [Expr(f"alicloud_instance.ecs[{index}].id") for index in range(spec["ecs"]["count"])] if spec["ecs"] else []


def _slb_backends(tf: _Tf) -> None:
    """SLB listeners (see ``listener_ports``) and every ECS instance as a backend server."""
    slb = Expr("alicloud_slb_load_balancer.slb.id")
    for port, protocol in tf.spec["load_balancer"]["ports"]:
        tf.resource("slb_listener", f"slb_{port}", [("load_balancer_id", slb), ("frontend_port", port), ("backend_port", port),
                                                    ("protocol", protocol), ("bandwidth", -1)], taggable=False)
    servers = [("backend_servers", Block([("server_id", server), ("weight", 100)])) for server in _instance_ids(tf.spec)]
    if servers:
        tf.resource("slb_backend", "slb", [("load_balancer_id", slb), *servers], taggable=False)


def _alb_backends(tf: _Tf) -> None:
    """An HTTP server group holding the ECS instances and an HTTP listener on 80 forwarding to it."""
    body: list[tuple[str, Any]] = [
        ("server_group_name", "iac-code-alb-sg"), ("protocol", "HTTP"), ("vpc_id", Expr("alicloud_vpc.vpc.id")),
        ("health_check_config", Block([("health_check_enabled", True)])),
    ]
    ports = tf.spec["load_balancer"]["ports"]
    body += [("servers", Block([("server_id", server), ("server_type", "Ecs"), ("port", ports[0][0]), ("weight", 100)]))
             for server in _instance_ids(tf.spec)]
    tf.resource("alb_server_group", "alb", body)
    tuples = Block([("server_group_id", Expr("alicloud_alb_server_group.alb.id"))])
    action = Block([("type", "ForwardGroup"), ("forward_group_config", Block([("server_group_tuples", tuples)]))])
    for port, _ in ports:
        tf.resource("alb_listener", f"alb_{port}", [("load_balancer_id", Expr("alicloud_alb_load_balancer.alb.id")),
                                                    ("listener_protocol", "HTTP"), ("listener_port", port),
                                                    ("default_actions", action)], taggable=False)


def _nat(tf: _Tf) -> None:
    spec = tf.spec
    eip = spec["eip"]
    if not eip:
        return
    names = ["eip" if index == 1 else f"eip{index}" for index in range(1, eip["count"] + 1)]
    for index, name in enumerate(names, start=1):
        tf.resource("eip", name, [("address_name", "iac-code-eip" if index == 1 else f"iac-code-eip-{index}"),
                                  ("bandwidth", str(eip["bandwidth"])), ("internet_charge_type", "PayByTraffic")])
        tf.output(f"{name}_address", f"Public IP address of EIP {index}.", f"alicloud_eip_address.{name}.ip_address")
    if not spec["nat"]:
        for index, name in enumerate(names[:spec["ecs"]["count"] if spec["ecs"] else 0]):
            tf.resource("eip_association", name, [("allocation_id", Expr(f"alicloud_eip_address.{name}.id")),
                                                   ("instance_id", Expr(f"alicloud_instance.ecs[{index}].id"))], taggable=False)
        return
    tf.resource("nat_gateway", "nat", [("nat_gateway_name", "iac-code-nat"), ("vpc_id", Expr("alicloud_vpc.vpc.id")),
                                       ("vswitch_id", Expr("alicloud_vswitch.vsw1.id")), ("nat_type", "Enhanced"),
                                       ("payment_type", "PayAsYouGo")])
    for name in names:
        tf.resource("eip_association", name, [("allocation_id", Expr(f"alicloud_eip_address.{name}.id")),
                                              ("instance_id", Expr("alicloud_nat_gateway.nat.id"))], taggable=False)
    for index in range(1, len(spec["vswitches"]) + 1):
        tf.resource("snat_entry", f"snat{index}", [
            ("snat_table_id", Expr("alicloud_nat_gateway.nat.snat_table_ids")),
            ("source_vswitch_id", Expr(f"alicloud_vswitch.vsw{index}.id")),
            ("snat_ip", Expr("alicloud_eip_address.eip.ip_address")),
            ("depends_on", [Expr("alicloud_eip_association.eip")])], taggable=False)
    tf.output("nat_gateway_id", "ID of the NAT gateway.", "alicloud_nat_gateway.nat.id")


def _data(tf: _Tf) -> None:
    spec = tf.spec
    if spec["rds"]:
        rds = spec["rds"]
        tf.resource("rds", "db", [
            ("instance_name", rds["name"]), ("engine", rds["engine"]), ("engine_version", rds["version"]),
            ("instance_type", rds["class"]), ("instance_storage", rds["storage"]), ("db_instance_storage_type", "cloud_essd"),
            ("vswitch_id", Expr('"${alicloud_vswitch.vsw1.id},${alicloud_vswitch.vsw2.id}"') if rds.get("ha")
             else Expr("alicloud_vswitch.vsw1.id")),
            *([("zone_id", Expr("alicloud_vswitch.vsw1.zone_id")), ("zone_id_slave_a", Expr("alicloud_vswitch.vsw2.zone_id"))]
              if rds.get("ha") else []),
            ("security_ips", [rds.get("whitelist") or spec["vpc"]["cidr"]]),
            ("deletion_protection", True)])
        tf.output("db_instance_id", "ID of the RDS instance.", "alicloud_db_instance.db.id")
        tf.output("db_connection_string", "Connection string of the RDS instance.", "alicloud_db_instance.db.connection_string")
        if rds.get("account"):
            password = tf.password("db_account_password", f"Password of the database account {rds['account']}.")
            tf.resource("rds_account", "db", [
                ("db_instance_id", Expr("alicloud_db_instance.db.id")), ("account_name", rds["account"]),
                ("account_password", password), ("account_type", "Normal")], taggable=False)
    if spec["redis"]:
        redis = spec["redis"]
        password = tf.password("redis_password", "Password of the Redis instance.")
        tf.resource("redis", "redis", [
            ("db_instance_name", redis["name"]), ("instance_type", "Redis"), ("instance_class", redis["class"]),
            ("engine_version", redis["version"]), ("vswitch_id", Expr("alicloud_vswitch.vsw1.id")),
            ("zone_id", Expr("alicloud_vswitch.vsw1.zone_id")), ("security_ips", [redis.get("whitelist") or spec["vpc"]["cidr"]]),
            ("password", password)])
        tf.output("redis_instance_id", "ID of the Redis instance.", "alicloud_kvstore_instance.redis.id")
    if spec["oss"]:
        oss = spec["oss"]
        body: list[tuple[str, Any]] = [("bucket", oss["name"]), ("acl", oss["acl"]),
                                       ("server_side_encryption_rule", Block([("sse_algorithm", oss["encryption"])]))]
        if oss.get("versioning"):
            body.append(("versioning", Block([("status", "Enabled")])))
        if oss.get("storage_class"):
            body.append(("storage_class", oss["storage_class"]))
        if oss.get("expire_days"):
            body.append(("lifecycle_rule", Block([("id", "expire-objects"), ("prefix", ""), ("enabled", True),
                                                  ("expiration", Block([("days", oss["expire_days"])]))])))
        tf.resource("oss_bucket", "bucket", body)
        tf.output("bucket_name", "Name of the OSS bucket.", "alicloud_oss_bucket.bucket.bucket")


def _databases(tf: _Tf) -> None:
    spec = tf.spec
    if spec.get("mongodb"):
        mongo = spec["mongodb"]
        password = tf.password("mongodb_password", "Password of the MongoDB root account.")
        tf.resource("mongodb", "mongo", [
            ("name", mongo["name"]), ("engine_version", mongo["version"]), ("db_instance_class", mongo["class"]),
            ("db_instance_storage", mongo["storage"]), ("vswitch_id", Expr("alicloud_vswitch.vsw1.id")),
            ("security_ip_list", [mongo.get("whitelist") or spec["vpc"]["cidr"]]), ("account_password", password)])
        tf.output("mongodb_instance_id", "ID of the MongoDB instance.", "alicloud_mongodb_instance.mongo.id")
    if spec.get("polardb"):
        polar = spec["polardb"]
        tf.resource("polardb", "polar", [
            ("db_type", polar["engine"]), ("db_version", polar["version"]), ("db_node_class", polar["class"]),
            ("pay_type", "PostPaid"), ("vswitch_id", Expr("alicloud_vswitch.vsw1.id")),
            ("security_ips", [polar.get("whitelist") or spec["vpc"]["cidr"]]), ("description", polar["name"])])
        tf.output("polardb_cluster_id", "ID of the PolarDB cluster.", "alicloud_polardb_cluster.polar.id")
        tf.output("polardb_connection_string", "Connection string of the PolarDB cluster.",
                  "alicloud_polardb_cluster.polar.connection_string")


def _nas(tf: _Tf) -> None:
    nas = tf.spec.get("nas")
    if not nas:
        return
    tf.resource("nas_file_system", "nas", [("protocol_type", nas["protocol"]), ("storage_type", nas["storage"]),
                                           ("file_system_type", "standard"), ("encrypt_type", 1),
                                           ("description", nas["name"])])
    tf.resource("nas_mount_target", "nas", [("file_system_id", Expr("alicloud_nas_file_system.nas.id")),
                                            ("access_group_name", "DEFAULT_VPC_GROUP_NAME"),
                                            ("vswitch_id", Expr("alicloud_vswitch.vsw1.id"))], taggable=False)
    tf.output("nas_file_system_id", "ID of the NAS file system.", "alicloud_nas_file_system.nas.id")
    tf.output("nas_mount_target_domain", "Domain to mount the file system from.",
              "alicloud_nas_mount_target.nas.mount_target_domain")


def _ess(tf: _Tf) -> None:
    spec = tf.spec
    ess = spec.get("ess")
    if not ess:
        return
    body: list[tuple[str, Any]] = [
        ("scaling_group_name", ess["name"]), ("min_size", ess["min"]), ("max_size", ess["max"]),
        ("vswitch_ids", [Expr(f"alicloud_vswitch.vsw{i}.id") for i in range(1, len(spec["vswitches"]) + 1)]),
        ("multi_az_policy", "BALANCE"), ("removal_policies", ["OldestInstance", "NewestInstance"])]
    if spec["load_balancer"] and spec["load_balancer"]["kind"] == "slb":
        body.append(("loadbalancer_ids", [Expr("alicloud_slb_load_balancer.slb.id")]))
    tf.resource("ess_scaling_group", "asg", body)
    tf.resource("ess_scaling_configuration", "asg", [
        ("scaling_group_id", Expr("alicloud_ess_scaling_group.asg.id")), ("image_id", ess["image"]),
        ("instance_type", ess["instance_type"]), ("security_group_id", Expr("alicloud_security_group.sg.id")),
        ("system_disk_category", "cloud_essd"), ("system_disk_size", ess["system_disk"]),
        ("internet_max_bandwidth_out", 0), ("active", True), ("enable", True), ("force_delete", True)], taggable=False)
    tf.output("scaling_group_id", "ID of the auto scaling group.", "alicloud_ess_scaling_group.asg.id")


def _ack(tf: _Tf) -> None:
    spec = tf.spec
    ack = spec.get("ack")
    if not ack:
        return
    vswitches = [Expr(f"alicloud_vswitch.vsw{index}.id") for index in range(1, len(spec["vswitches"]) + 1)]
    body: list[tuple[str, Any]] = [
        ("name", ack["name"]), ("cluster_spec", "ack.pro.small"), ("vswitch_ids", vswitches),
        ("pod_cidr", ack["pod_cidr"]), ("service_cidr", ack["service_cidr"]), ("new_nat_gateway", True),
        ("slb_internet_enabled", ack["public_api"])]
    if ack["version"]:
        body.append(("version", ack["version"]))
    tf.resource("ack_cluster", "ack", body)
    tf.resource("ack_node_pool", "default", [
        ("cluster_id", Expr("alicloud_cs_managed_kubernetes.ack.id")), ("node_pool_name", "default-pool"),
        ("vswitch_ids", vswitches), ("instance_types", [ack["node_type"]]), ("system_disk_category", "cloud_essd"),
        ("system_disk_size", 120), ("desired_size", ack["nodes"])])
    tf.output("ack_cluster_id", "ID of the ACK cluster.", "alicloud_cs_managed_kubernetes.ack.id")


def _fc(tf: _Tf) -> None:
    spec = tf.spec
    fc = spec.get("fc")
    if not fc:
        return
    service: list[tuple[str, Any]] = [("name", fc["service"]), ("description", "iac-code service")]
    if (spec.get("ram") or {}).get("principal") == "fc.aliyuncs.com":
        service.append(("role", Expr("alicloud_ram_role.role.arn")))
    if spec.get("sls"):
        service.append(("log_config", Block([("project", Expr("alicloud_log_project.logs.project_name")),
                                             ("logstore", Expr("alicloud_log_store.logs.logstore_name"))])))
    tf.resource("fc_service", "service", service)
    for name, description in (("function_code_bucket", "OSS bucket holding the function's code."),
                              ("function_code_object", "OSS object (a zip) of the function's code.")):
        tf.blocks.append(_top("variable", [name], [("description", description), ("type", Expr("string"))]))
    tf.resource("fc_function", "function", [
        ("service", Expr("alicloud_fc_service.service.name")), ("name", fc["function"]), ("runtime", fc["runtime"]),
        ("handler", "index.handler"), ("memory_size", fc["memory"]), ("timeout", fc["timeout"]),
        ("oss_bucket", Expr("var.function_code_bucket")), ("oss_key", Expr("var.function_code_object"))], taggable=False)
    tf.output("function_name", "Name of the function.", "alicloud_fc_function.function.name")
    if fc["http"]:
        config = {"authType": "anonymous" if fc["anonymous"] else "function", "methods": ["GET", "POST"]}
        tf.resource("fc_trigger", "http", [
            ("service", Expr("alicloud_fc_service.service.name")), ("function", Expr("alicloud_fc_function.function.name")),
            ("name", "http"), ("type", "http"), ("config", Expr(f"jsonencode({json.dumps(config)})"))], taggable=False)


def _services(tf: _Tf) -> None:
    spec = tf.spec
    if spec.get("ram"):
        from iac_code_runtime_offline.engine.cloud_documents import ram_documents

        ram = spec["ram"]
        trust, policy = ram_documents(ram)
        tf.resource("ram_role", "role", [("role_name", ram["name"]), ("description", "iac-code role"),
                                         ("assume_role_policy_document", Expr(f"jsonencode({json.dumps(trust)})"))],
                    taggable=False)
        tf.output("ram_role_arn", "ARN of the RAM role.", "alicloud_ram_role.role.arn")
        if policy is not None:
            tf.resource("ram_policy", "policy", [("policy_name", f"{ram['name']}-policy"),
                                                 ("policy_document", Expr(f"jsonencode({json.dumps(policy)})"))],
                        taggable=False)
            tf.blocks.append(_top("resource", ["alicloud_ram_role_policy_attachment", "role"], [
                ("policy_name", Expr("alicloud_ram_policy.policy.policy_name")), ("policy_type", "Custom"),
                ("role_name", Expr("alicloud_ram_role.role.role_name"))]))
    if spec.get("kms"):
        tf.resource("kms_key", "key", [("description", "iac-code key"), ("key_usage", "ENCRYPT/DECRYPT"),
                                       ("automatic_rotation", "Enabled"),
                                       ("rotation_interval", f"{spec['kms']['rotation_days']}d"),
                                       ("pending_window_in_days", 7)])
        tf.output("kms_key_id", "ID of the KMS key.", "alicloud_kms_key.key.id")
    if spec.get("sls"):
        sls = spec["sls"]
        tf.resource("sls_project", "logs", [("project_name", sls["project"]), ("description", "iac-code logs")])
        tf.resource("sls_logstore", "logs", [("project_name", Expr("alicloud_log_project.logs.project_name")),
                                             ("logstore_name", sls["logstore"]), ("retention_period", sls["ttl"]),
                                             ("shard_count", sls["shards"])], taggable=False)
        tf.output("log_project_name", "Name of the Log Service project.", "alicloud_log_project.logs.project_name")
    if spec.get("dns"):
        from iac_code_runtime_offline.engine.cloud_documents import split_domain

        dns = spec["dns"]
        rr, domain = split_domain(dns["name"])
        value: Any = dns["value"]
        if value == "@load_balancer":
            kind = spec["load_balancer"]["kind"]
            value = Expr("alicloud_alb_load_balancer.alb.dns_name" if kind == "alb" else
                         "alicloud_nlb_load_balancer.nlb.dns_name" if kind == "nlb" else "alicloud_slb_load_balancer.slb.address")
        elif value == "@eip":
            value = Expr("alicloud_eip_address.eip.ip_address")
        elif value == "@parameter":
            tf.blocks.append(_top("variable", ["dns_record_value"], [
                ("description", f"Value of the {dns['type']} record {dns['name']} (an IP address or a host name)."),
                ("type", Expr("string"))]))
            value = Expr("var.dns_record_value")
        tf.resource("dns_record", "record", [("domain_name", domain), ("rr", rr), ("type", dns["type"]),
                                             ("value", value), ("ttl", dns["ttl"])], taggable=False)


def render_terraform(spec: dict[str, Any], blocks: list[str]) -> str:
    """Terraform HCL (provider pinned to ``TERRAFORM_PROVIDER_VERSION``) for a resolved spec."""
    header = [
        "terraform {\n  required_providers {\n    alicloud = {\n      source  = \"aliyun/alicloud\"\n"
        f"      version = \"{TERRAFORM_PROVIDER_VERSION}\"\n    }}\n  }}\n}}",
        _top("provider", ["alicloud"], [("region", spec["region"] or "cn-hangzhou")]),
    ]
    tf = _Tf(spec)
    _network(tf)
    _ecs(tf)
    _load_balancer(tf)
    _nat(tf)
    _data(tf)
    _databases(tf)
    _nas(tf)
    _services(tf)
    _fc(tf)
    _ack(tf)
    _ess(tf)
    comment = "# Generated by iac-code: " + ", ".join(blocks) + "\n"
    text = comment + "\n\n".join(header + tf.blocks + tf.outputs) + "\n"
    if spec["vpc"] and spec["vpc"].get("existing"):
        text = _existing_references(text, spec["vpc"]["cidr"])
    return text


def _existing_references(text: str, cidr: str) -> str:
    """The network we did not create, referred to by its variables."""
    text = text.replace("alicloud_vpc.vpc.id", "var.vpc_id").replace(f'"{cidr}"', "var.vpc_cidr_block")
    text = re.sub(r"alicloud_vswitch\.vsw(\d+)\.id", lambda m: f"var.vswitch_ids[{int(m.group(1)) - 1}]", text)
    text = re.sub(r"alicloud_vswitch\.vsw(\d+)\.zone_id", lambda m: f"var.zone_ids[{int(m.group(1)) - 1}]", text)
    return text
