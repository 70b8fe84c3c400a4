"""Candidate architectures, derived deterministically from what the engine understood.

Always an economy single-zone candidate and a highly available two-zone one (a load balancer, and a standby
database when a database is involved); a serverless one (Function Compute behind API Gateway, OSS for static
content) when the workload is a web site or API without servers the user asked to manage. Each candidate is
plain JSON: ``name``, ``summary``, ``generation_prompt``, ``hard_constraints``, ``components`` (for the diagram).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from iac_code.api import Understanding

DB_TYPES = ("ALIYUN::RDS::", "ALIYUN::POLARDB::", "ALIYUN::REDIS::", "ALIYUN::MONGODB::")
WEB_WORDS = ("web", "website", "site", "app", "application", "api", "http", "service", "shop", "store", "blog",
             "网站", "应用", "服务", "商城", "博客", "接口")
SERVER_BOUND = ("ALIYUN::CS::", "ALIYUN::ACK::", "ALIYUN::ESS::", "GPU", "gpu", "kubernetes", "Kubernetes", "K8s", "k8s")


def _types(understanding: Understanding) -> list[str]:
    return [str(r.get("type", "")) for r in understanding.resources]


def _count(understanding: Understanding, prefix: str) -> int:
    return sum(int(r.get("count", 1) or 1) for r in understanding.resources if str(r.get("type", "")).startswith(prefix))


def plan_candidates(understanding: Understanding, prompt: str) -> list[dict[str, Any]]:
    """Two or three candidates that really differ, for this understanding (same input, same candidates)."""
    types = _types(understanding)
    text = f"{prompt} {understanding.summary}"
    has_db = any(t.startswith(DB_TYPES) for t in types) or any(w in text.lower() for w in ("database", "mysql", "数据库"))
    web = any(w in text.lower() for w in WEB_WORDS) or any(t.startswith(("ALIYUN::SLB::", "ALIYUN::ALB::")) for t in types)
    server_bound = any(marker in text or any(marker in t for t in types) for marker in SERVER_BOUND)
    region = understanding.region or "cn-hangzhou"
    servers = max(1, _count(understanding, "ALIYUN::ECS::Instance"))
    db_phrase = " and an RDS MySQL database instance (basic edition, single node)" if has_db else ""
    candidates = [{
        "name": "Economy single zone",
        "summary": (f"Everything in one zone of {region}: a VPC with one vSwitch, a security group and "
                    f"{servers} ECS instance(s){' with a basic single-node RDS MySQL database' if has_db else ''}. "
                    "Cheapest; an outage of the zone stops the service."),
        "generation_prompt": (f"Create in {region} a VPC with one vSwitch in a single zone, a security group and "
                              f"{servers} ECS instance(s){db_phrase}."),
        "hard_constraints": {"min_zones": 1},
        "components": {"zones": 1, "servers": servers, "load_balancer": False, "database": "basic" if has_db else "",
                       "serverless": False},
    }]
    ha_servers = max(2, servers)
    ha_db = (" and an RDS MySQL database instance in high availability edition (Category HighAvailability) with a "
             "standby in the second zone") if has_db else ""
    candidates.append({
        "name": "High availability across two zones",
        "summary": (f"Two zones of {region}: a VPC with two vSwitches in different zones, a load balancer (SLB) in "
                    f"front of {ha_servers} ECS instances spread over both zones"
                    f"{', and an RDS MySQL primary with a standby in the second zone' if has_db else ''}. "
                    "Survives the loss of a zone; costs more."),
        "generation_prompt": (f"Create in {region} a VPC with two vSwitches in two different zones, a security group, "
                              f"{ha_servers} ECS instances spread over both zones behind an SLB load balancer{ha_db}."),
        "hard_constraints": {"min_zones": 2, "required_types": ["ALIYUN::SLB::LoadBalancer"]},
        "components": {"zones": 2, "servers": ha_servers, "load_balancer": True,
                       "database": "high_availability" if has_db else "", "serverless": False},
    })
    if web and not server_bound:
        candidates.append({
            "name": "Serverless",
            "summary": (f"No servers to manage in {region}: Function Compute runs the application behind API Gateway, "
                        "static content is served from an OSS bucket. Pay per request; suits spiky or modest traffic"
                        f"{' (the database becomes a separate managed service)' if has_db else ''}."),
            "generation_prompt": (f"Create in {region} a Function Compute service with an HTTP function, an API Gateway "
                                  "group with an API in front of it, and an OSS bucket for static content."),
            "hard_constraints": {"required_types": ["ALIYUN::FC"]},
            "components": {"zones": 0, "servers": 0, "load_balancer": False, "database": "", "serverless": True},
        })
    return candidates


def check_constraints(constraints: Mapping[str, Any], resources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The hard constraints a generated template breaks (empty: all hold)."""
    problems: list[str] = []
    types = [str(r.get("type", "")) for r in resources]
    min_zones = int(constraints.get("min_zones", 0) or 0)
    if min_zones:
        switches = [r for r in resources if str(r.get("type", "")) == "ALIYUN::ECS::VSwitch"]
        zones = {str((r.get("properties") or {}).get("ZoneId", "")) or f"#{i}" for i, r in enumerate(switches)}
        if len(zones) < min_zones:
            problems.append(f"needs at least {min_zones} zone(s), the template has {len(zones)}")
    for required in constraints.get("required_types", ()):  # a type or a type prefix (``ALIYUN::FC`` = FC or FC3)
        if not any(t.startswith(required) for t in types):
            problems.append(f"needs a {required} resource, the template has none")
    return problems


def mermaid(candidate: Mapping[str, Any]) -> str:
    """A compact Mermaid ``flowchart`` of the candidate (renders as is)."""
    c = candidate["components"]
    lines = ["flowchart LR", '  U(["Users"])']
    if c.get("serverless"):
        lines += ['  GW["API Gateway"]', '  FC["Function Compute"]', '  OSS[("OSS bucket")]',
                  "  U --> GW", "  GW --> FC", "  U --> OSS"]
        return "\n".join(lines)
    zones = int(c.get("zones", 1) or 1)
    servers = int(c.get("servers", 1) or 1)
    entry = "U"
    if c.get("load_balancer"):
        lines += ['  LB["SLB load balancer"]', "  U --> LB"]
        entry = "LB"
    for z in range(zones):
        lines.append(f'  subgraph Z{z + 1}["Zone {chr(ord("A") + z)}"]')
        for s in range(servers):
            if s % zones == z:
                lines.append(f'    E{s + 1}["ECS {s + 1}"]')
        if c.get("database") == "high_availability":
            lines.append(f'    D{z + 1}[("RDS {"primary" if z == 0 else "standby"}")]')
        elif c.get("database") and z == 0:
            lines.append('    D1[("RDS MySQL")]')
        lines.append("  end")
    for s in range(servers):
        lines.append(f"  {entry} --> E{s + 1}")
        if c.get("database"):
            lines.append(f"  E{s + 1} --> D1")
    if c.get("database") == "high_availability" and zones > 1:
        lines.append("  D1 -. replication .-> D2")
    return "\n".join(lines)


def planned_resources(candidate: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resources a candidate's components imply (for an indicative price before its template exists)."""
    c = candidate["components"]
    if c.get("serverless"):
        return [{"name": "Service", "type": "ALIYUN::FC::Service"}, {"name": "Function", "type": "ALIYUN::FC::Function"},
                {"name": "ApiGroup", "type": "ALIYUN::ApiGateway::Group"}, {"name": "Api", "type": "ALIYUN::ApiGateway::Api"},
                {"name": "Bucket", "type": "ALIYUN::OSS::Bucket"}]
    resources: list[dict[str, Any]] = [{"name": "Vpc", "type": "ALIYUN::ECS::VPC"}]
    resources += [{"name": f"VSwitch{z + 1}", "type": "ALIYUN::ECS::VSwitch"} for z in range(int(c.get("zones", 1) or 1))]
    resources.append({"name": "Servers", "type": "ALIYUN::ECS::InstanceGroup",
                      "properties": {"MaxAmount": int(c.get("servers", 1) or 1)}})
    if c.get("load_balancer"):
        resources.append({"name": "LoadBalancer", "type": "ALIYUN::SLB::LoadBalancer"})
    if c.get("database"):
        category = "HighAvailability" if c["database"] == "high_availability" else "Basic"
        resources.append({"name": "Database", "type": "ALIYUN::RDS::DBInstance", "properties": {"Category": category}})
    return resources
