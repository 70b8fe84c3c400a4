"""A grammar of generation requests for property-based tests: requests composed from resources, quantities and values.

``requests()`` draws a request (English, Chinese or both mixed; ROS or Terraform; noun phrases or imperative; one to
five resources, each with a quantity in any form and stated values) together with the specification it must produce,
known by construction. ``check`` runs the engine's reading and application of the request and compares its spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from random import Random
from typing import Any

from hypothesis import strategies as st
from iac_code_runtime_offline.engine.generation import apply_delta
from iac_code_runtime_offline.engine.request_parsing import parse_request

EN_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
            11: "eleven", 12: "twelve"}
ZH_WORDS = {1: "一", 2: "两", 3: "三", 4: "四", 5: "五", 6: "六", 7: "七", 8: "八", 9: "九", 10: "十", 11: "十一", 12: "十二",
            13: "十三", 14: "十四", 15: "十五", 16: "十六", 20: "二十"}
INSTANCE_TYPES = ["ecs.g7.large", "ecs.c7.xlarge", "ecs.r7.2xlarge", "ecs.g8i.large", "ecs.hfc7.large", "ecs.t6-c1m2.large"]
IMAGES = {"Ubuntu": "ubuntu", "CentOS": "centos", "Debian": "debian", "Windows": "win2022"}
ZONES = {None: ["cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j", "cn-hangzhou-k"],
         "cn-shanghai": ["cn-shanghai-l", "cn-shanghai-m", "cn-shanghai-n", "cn-shanghai-b"],
         "cn-beijing": ["cn-beijing-h", "cn-beijing-i", "cn-beijing-j", "cn-beijing-k"],
         "cn-shenzhen": ["cn-shenzhen-a", "cn-shenzhen-b", "cn-shenzhen-c", "cn-shenzhen-d"],
         "ap-southeast-1": ["ap-southeast-1a", "ap-southeast-1b", "ap-southeast-1c"]}
REGIONS = {"cn-shanghai": ("cn-shanghai", "上海"), "cn-beijing": ("cn-beijing", "北京"), "cn-shenzhen": ("cn-shenzhen", "深圳"),
           "ap-southeast-1": ("Singapore", "新加坡")}
VPC_CIDRS = ["10.0.0.0/16", "10.20.0.0/16", "172.16.0.0/16", "192.168.0.0/16", "10.40.0.0/16"]
SOURCES = ["10.0.0.0/8", "203.0.113.0/24", "198.51.100.0/24", "172.16.0.0/12"]
RDS_ENGINES = [("MySQL", "8.0", "8.0"), ("MySQL", "5.7", "5.7"), ("PostgreSQL", "15", "15.0"), ("PostgreSQL", "14", "14.0")]
REDIS_CLASSES = {1: "redis.master.small.default", 2: "redis.master.mid.default", 4: "redis.master.stand.default",
                 8: "redis.master.large.default", 16: "redis.master.2xlarge.default"}
NAMES = ["alpha", "billing", "core", "data", "edge", "media", "orders", "reports", "search", "web"]
RESOURCES = ["ecs", "vswitch", "vpc", "lb", "nat", "eip", "rds", "redis", "oss", "mongodb", "sls", "kms", "nas", "dns", "fc",
             "ack", "ess", "rules"]


@dataclass
class Request:
    """A drawn request and the spec it must produce."""

    prompt: str = ""
    lang: str = "en"
    format: str = "ros-yaml"
    region: str | None = None
    kinds: set[str] = field(default_factory=set)  # spec keys that must be set (and no other)
    counts: dict[str, int] = field(default_factory=dict)  # "ecs", "eip", "vswitch"
    values: dict[tuple[str, ...], Any] = field(default_factory=dict)  # spec path -> value
    rules: list[tuple[str, str]] = field(default_factory=list)  # (port range, source)


def _quantity(rng: Random, n: int, lang: str, measure: str = "台") -> str:
    """``n`` written before its noun, in one of the ways people write it."""
    if lang == "zh":
        forms = [f"{n}{measure}", f"{n} {measure}"] + ([f"{ZH_WORDS[n]}{measure}"] if n in ZH_WORDS else [])
    else:
        forms = [str(n)] + ([EN_WORDS[n], EN_WORDS[n].capitalize()] if n in EN_WORDS else [])
        forms += ["a pair of"] if n == 2 else ["a dozen"] if n == 12 else ["a single", "one", "a"] if n == 1 else []
    return rng.choice(forms)


def _plural(word: str, n: int) -> str:
    return word if n == 1 else word + ("es" if word.endswith("ch") else "s")


def _ecs(rng: Random, request: Request, lang: str) -> str:
    n = rng.randint(1, 12)
    request.kinds |= {"ecs", "security_group"}
    request.counts["ecs"] = n
    kind = rng.choice([None, *INSTANCE_TYPES])
    image = rng.choice([None, *sorted(IMAGES)])
    disk = rng.choice([None, *[50, 100, 200, 500]])
    if kind:
        request.values[("ecs", "instance_type")] = kind
    if image:
        request.values[("ecs", "image")] = IMAGES[image]
    if disk:
        request.values[("ecs", "data_disk")] = disk
    if lang == "zh":
        parts = [f"{_quantity(rng, n, 'zh')}{(image + ' ') if image else ''}ECS"]
        parts += [f"规格 {kind}"] if kind else []
        parts += [f"数据盘 {disk}G"] if disk else []
        return "，".join(parts)
    style = rng.choice(["pre", "post"]) if n > 1 or kind else "pre"
    noun = rng.choice(["ECS instance", "server", "instance", "VM"]) if image else rng.choice(["ECS instance", "ECS server"])
    if style == "post":
        head = f"{kind} x {n}" if kind and not image else f"{(image + ' ') if image else ''}ECS x {n}"
        if kind and image:
            head += f" of type {kind}"
    else:
        head = f"{_quantity(rng, n, 'en')} {(image + ' ') if image else ''}{_plural(noun, n)}"
        head += f" of type {kind}" if kind else ""
    return head + (f" with {'a ' if n == 1 else ''}{disk} GB data {_plural('disk', n)}" if disk else "")


def _vswitch(rng: Random, request: Request, lang: str) -> str:
    zoned = (rng.random() < 0.5)
    n = rng.randint(2, len(ZONES[request.region])) if zoned else rng.randint(1, 6)
    request.kinds |= {"vpc"}
    request.counts["vswitch"] = n
    if zoned:
        zones = ZONES[request.region][:n]
        request.values[("vswitches", "zones")] = zones
        listed = ", ".join(zones[:-1]) + (" and " if lang == "en" else "和") + zones[-1]
        return f"{n}个交换机，分别在 {listed}" if lang == "zh" else f"{_quantity(rng, n, 'en')} vSwitches in {listed}"
    if lang == "zh":
        return f"{_quantity(rng, n, 'zh', '个')}交换机"
    return f"{_quantity(rng, n, 'en', '个')} {_plural('vSwitch', n)}"


def _vpc(rng: Random, request: Request, lang: str) -> str:
    request.kinds |= {"vpc"}
    cidr = rng.choice([None, *VPC_CIDRS])
    name = rng.choice([None, *[f"{name}-vpc" for name in NAMES]])
    if cidr:
        request.values[("vpc", "cidr")] = cidr
    if name:
        request.values[("vpc", "name")] = name
    if lang == "zh":
        return "一个专有网络" + (f"，网段 {cidr}" if cidr else "") + (f"，名为 {name}" if name else "")
    return "a VPC" + (f" with CIDR {cidr}" if cidr else "") + (f" named {name}" if name else "")


def _lb(rng: Random, request: Request, lang: str) -> str:
    kind = rng.choice(["slb", "alb", "nlb"])
    request.kinds |= {"load_balancer", "vpc"}
    request.values[("load_balancer", "kind")] = kind
    port = rng.choice([None, *[80, 8080, 443, 9000]])
    if port:
        request.values[("load_balancer", "listeners")] = [port]
    if lang == "zh":
        noun = {"slb": "负载均衡", "alb": "应用型负载均衡", "nlb": "网络型负载均衡"}[kind]
        return f"一个{noun}" + (f"，监听 {port} 端口" if port else "")
    noun = {"slb": rng.choice(["an SLB", "a CLB", "a load balancer"]), "alb": "an ALB", "nlb": "an NLB"}[kind]
    return noun + (f" with a listener on port {port}" if port else "")


def _nat(rng: Random, request: Request, lang: str) -> str:
    request.kinds |= {"nat", "eip", "vpc"}
    request.counts.setdefault("eip", 1)
    return "一个NAT网关" if lang == "zh" else "a NAT gateway"


def _eip(rng: Random, request: Request, lang: str) -> str:
    n = rng.randint(1, 5)
    request.kinds |= {"eip"}
    request.counts["eip"] = n
    if lang == "zh":
        return f"{_quantity(rng, n, 'zh', '个')}{rng.choice(['弹性公网IP', 'EIP'])}"
    return f"{_quantity(rng, n, 'en', '个')} {_plural('EIP', n)}"


def _rds(rng: Random, request: Request, lang: str) -> str:
    engine, version, expected = rng.choice(RDS_ENGINES)
    storage = rng.choice([None, *[50, 100, 200, 500]])
    request.kinds |= {"rds", "vpc"}
    request.values[("rds", "engine")] = engine
    request.values[("rds", "version")] = expected
    if storage:
        request.values[("rds", "storage")] = storage
    if lang == "zh":
        return f"{engine} {version} 数据库" + (f"，存储 {storage}G" if storage else "")
    return f"an RDS {engine} {version} instance" + (f" with {storage} GB storage" if storage else "")


def _redis(rng: Random, request: Request, lang: str) -> str:
    version = rng.choice(["5.0", "6.0", "7.0"])
    memory = rng.choice([None, *sorted(REDIS_CLASSES)])
    request.kinds |= {"redis", "vpc"}
    request.values[("redis", "version")] = version
    if memory:
        request.values[("redis", "class")] = REDIS_CLASSES[memory]
    if lang == "zh":
        return f"Redis {version}" + (f"，内存 {memory}G" if memory else "")
    return f"a Redis {version}" + (f" with {memory} GB memory" if memory else "")


def _oss(rng: Random, request: Request, lang: str) -> str:
    name = rng.choice([f"{name}-bucket-2027" for name in NAMES])
    versioned = (rng.random() < 0.5)
    request.kinds |= {"oss"}
    request.values[("oss", "name")] = name
    if versioned:
        request.values[("oss", "versioning")] = True
    if lang == "zh":
        return f"存储桶 {name}" + ("，开启版本控制" if versioned else "")
    return f"an OSS bucket named {name}" + (" with versioning" if versioned else "")


def _mongodb(rng: Random, request: Request, lang: str) -> str:
    version = rng.choice(["4.4", "5.0", "6.0"])
    request.kinds |= {"mongodb", "vpc"}
    request.values[("mongodb", "version")] = version
    return f"MongoDB {version} 实例" if lang == "zh" else f"a MongoDB {version} instance"


def _sls(rng: Random, request: Request, lang: str) -> str:
    project = rng.choice([f"{name}-logs" for name in NAMES])
    days = rng.choice([7, 30, 90, 180])
    request.kinds |= {"sls"}
    request.values[("sls", "project")] = project
    request.values[("sls", "ttl")] = days
    if lang == "zh":
        return f"日志服务项目 {project}，日志库保存 {days} 天"
    return f"a Log Service project {project} with {days} days retention"


def _kms(rng: Random, request: Request, lang: str) -> str:
    request.kinds |= {"kms"}
    return "一个KMS密钥" if lang == "zh" else "a KMS key"


def _nas(rng: Random, request: Request, lang: str) -> str:
    protocol = rng.choice(["NFS", "SMB"])
    request.kinds |= {"nas", "vpc"}
    request.values[("nas", "protocol")] = protocol
    return f"{protocol} 协议的 NAS 文件系统" if lang == "zh" else f"an {protocol} NAS file system"


def _dns(rng: Random, request: Request, lang: str) -> str:
    label = rng.choice(["www", "api", "app", "shop"])
    address = rng.choice(["203.0.113.10", "198.51.100.7", "192.0.2.44"])
    request.kinds |= {"dns"}
    request.values[("dns", "name")] = f"{label}.example.com"
    request.values[("dns", "value")] = address
    if lang == "zh":
        return f"解析记录 {label}.example.com 指向 {address}"
    return f"an A record {label}.example.com pointing to {address}"


def _fc(rng: Random, request: Request, lang: str) -> str:
    runtime, spoken = rng.choice([("python3.10", "Python"), ("nodejs18", "Node.js"), ("go1", "Go")])
    memory = rng.choice([256, 512, 1024])
    request.kinds |= {"fc"}
    request.values[("fc", "runtime")] = runtime
    request.values[("fc", "memory")] = memory
    if lang == "zh":
        return f"函数计算，{spoken} 运行时，内存 {memory}MB"
    return f"a {spoken} function with {memory} MB memory"


def _ack(rng: Random, request: Request, lang: str) -> str:
    nodes = rng.randint(1, 10)
    request.kinds |= {"ack", "vpc"}
    request.values[("ack", "nodes")] = nodes
    if lang == "zh":
        return f"Kubernetes 集群，{_quantity(rng, nodes, 'zh', '个')}节点"
    return f"an ACK cluster with {_quantity(rng, nodes, 'en', '个')} {_plural('node', nodes)}"


def _ess(rng: Random, request: Request, lang: str) -> str:
    low = rng.randint(1, 4)
    high = rng.randint(low + 1, 12)
    request.kinds |= {"ess", "security_group", "vpc"}
    request.values[("ess", "min")] = low
    request.values[("ess", "max")] = high
    if lang == "zh":
        return f"弹性伸缩组，最少{low}台最多{high}台"
    return f"an auto scaling group between {low} and {high} instances"


def _rules(rng: Random, request: Request, lang: str) -> str:
    port, spoken = rng.choice([("22/22", "SSH"), ("3389/3389", "RDP"), ("8080/8080", "port 8080"), ("443/443", "port 443")])
    source = rng.choice(SOURCES)
    request.rules.append((port, source))
    request.kinds |= {"security_group", "vpc"}
    if lang == "zh":
        number = port.split("/")[0]
        return f"开放 {number} 端口，仅允许 {source} 访问"
    return f"open {spoken} from {source}" if spoken.startswith("port") else f"allow {spoken} from {source}"


ITEMS = {"ecs": _ecs, "vswitch": _vswitch, "vpc": _vpc, "lb": _lb, "nat": _nat, "eip": _eip, "rds": _rds, "redis": _redis,
         "oss": _oss, "mongodb": _mongodb, "sls": _sls, "kms": _kms, "nas": _nas, "dns": _dns, "fc": _fc, "ack": _ack,
         "ess": _ess, "rules": _rules}
_EXCLUSIVE = [{"ecs", "ess"}, {"ess", "ack"}]


def compose(rng: Random) -> Request:
    """One request and its expected spec, drawn with ``rng``."""
    request = Request()
    request.lang = rng.choice(["en", "zh", "mixed"])
    request.region = rng.choice([None, *sorted(REGIONS)])
    chosen = rng.sample(RESOURCES, rng.randint(1, 5))
    for pair in _EXCLUSIVE:
        if pair <= set(chosen):
            chosen.remove(sorted(pair)[1])
    if "rules" in chosen and not {"ecs", "ess"} & set(chosen):
        chosen.insert(0, "ecs")
    if "rules" in chosen:  # rules read best after what they open ports on
        chosen.remove("rules")
        chosen.append("rules")
    phrases = []
    for kind in chosen:
        lang = request.lang if request.lang != "mixed" else rng.choice(["en", "zh"])
        phrases.append((lang, ITEMS[kind](rng, request, lang)))
    request.format = rng.choice(["ros-yaml", "ros-yaml", "ros-json", "terraform"])
    region = request.region
    zh = request.lang == "zh"
    separator = rng.choice(["，", "、", " + "] if zh else [", ", " + ", "; "])
    body = separator.join(phrase for _, phrase in phrases)
    if region:
        english, chinese = REGIONS[region]
        body = f"{chinese}地域，{body}" if zh else f"{body} in {english}" if (rng.random() < 0.5) else f"{english}: {body}"
    lead = rng.choice(["", "帮我创建", "需要"] if zh else ["", "Create ", "I need ", "Can you give me "])
    tail = {"ros-yaml": rng.choice(["", "，ROS 模板" if zh else ", as a ROS template"]),
            "ros-json": "，JSON 格式" if zh else rng.choice([", as JSON", " in JSON"]),
            "terraform": "，用 Terraform" if zh else rng.choice([", as Terraform", " (Terraform)"])}[request.format]
    request.prompt = re.sub(r"(?<![\w-])a (?=[aeiouAEIOU]|ECS|EIP|SLB|NLB|ALB|NAS|NFS|SMB|RDS|ACK|OSS|MongoDB|SQL)", "an ",
                            lead + body + tail)
    if request.kinds & {"ecs", "load_balancer", "nat", "rds", "redis", "mongodb", "nas", "ack", "ess", "security_group"}:
        request.kinds.add("vpc")
    return request


def requests() -> st.SearchStrategy[Request]:
    """Requests drawn through Hypothesis' random (cheap to draw, and still shrunk to a small failing request)."""
    return st.randoms(use_true_random=False).map(compose)


def _at(spec: dict[str, Any], path: tuple[str, ...]) -> Any:
    if path == ("vswitches", "zones"):
        return [vswitch["zone"] for vswitch in spec["vswitches"]][:len(spec["vswitches"])]
    value: Any = spec
    for step in path:
        value = value.get(step) if isinstance(value, dict) else None
    return value


SPEC_KINDS = ("vpc", "security_group", "ecs", "load_balancer", "nat", "eip", "rds", "redis", "oss", "kms", "sls", "mongodb",
              "polardb", "dns", "nas", "ram", "fc", "ack", "ess")


def check(request: Request) -> None:
    """The engine's spec for the request is the one expected by construction."""
    delta = parse_request(request.prompt)
    spec = apply_delta(None, delta)
    where = f"\nrequest: {request.prompt!r}"
    assert delta["unmapped"] == [], f"reported {delta['unmapped']}{where}"
    present = {kind for kind in SPEC_KINDS if spec.get(kind)}
    assert present == request.kinds, f"kinds {sorted(present)} != {sorted(request.kinds)}{where}"
    assert spec["format"] == request.format, f"format {spec['format']}{where}"
    if request.region:
        assert spec["region"] == request.region, f"region {spec['region']}{where}"
    if "ecs" in request.counts:
        assert spec["ecs"]["count"] == request.counts["ecs"], f"ECS count {spec['ecs']['count']}{where}"
    if "eip" in request.counts:
        assert spec["eip"]["count"] == request.counts["eip"], f"EIP count {spec['eip']['count']}{where}"
    lb = spec["load_balancer"] or {}
    minimum = 2 if lb.get("kind") in ("alb", "nlb") or spec["ack"] or spec["ess"] else 1 if "vpc" in request.kinds else 0
    vswitches = max(request.counts.get("vswitch", 0), minimum)
    assert len(spec["vswitches"]) == vswitches, f"vSwitches {len(spec['vswitches'])} != {vswitches}{where}"
    for path, value in request.values.items():
        found = _at(spec, path)
        if path == ("vswitches", "zones"):
            found = found[:len(value)]
        elif path == ("ecs", "image"):
            found = str(found or "")[:len(value)]
        assert found == value, f"{'.'.join(path)} = {found!r}, not {value!r}{where}"
    rules = {(rule["port_range"], rule["source"]) for rule in (spec["security_group"] or {}).get("rules", [])}
    for rule in request.rules:
        assert rule in rules, f"rule {rule} not in {sorted(rules)}{where}"
