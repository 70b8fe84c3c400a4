"""Reading a request: the keyword/regex rules that turn English or Chinese text into a generation *delta*.

``parse_request`` returns everything a request says (blocks to add or remove, counts, settings, rules,
format, region, tags, what cannot be mapped); ``generation.apply_delta`` applies it to the previous spec.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

NUMBER_WORDS = {
    "a": 1, "an": 1, "another": 1, "one": 1, "single": 1, "two": 2, "both": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}
_NUM = r"(\d+|an?|another|one|single|two|both|three|four|five|six|seven|eight|nine|ten|[一两二三四五六七八九十])"
ANYWHERE = "0.0.0.0/0"

_CIDR = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3}/\d{1,2})(?![\d.])")
_REGION_PREFIXES = "cn|ap|us|eu|me|sa|na"
_ZONE = re.compile(rf"\b((?:{_REGION_PREFIXES})-[a-z]+(?:-\d+)?-[a-z])\b", re.IGNORECASE)
_REGION = re.compile(rf"\b((?:{_REGION_PREFIXES})-[a-z]+(?:-\d+)?)\b(?!-[a-z]\b)", re.IGNORECASE)
REGION_NAMES = {
    "杭州": "cn-hangzhou", "上海": "cn-shanghai", "北京": "cn-beijing", "深圳": "cn-shenzhen", "张家口": "cn-zhangjiakou",
    "青岛": "cn-qingdao", "成都": "cn-chengdu", "香港": "cn-hongkong", "新加坡": "ap-southeast-1", "hangzhou": "cn-hangzhou",
    "shanghai": "cn-shanghai", "beijing": "cn-beijing", "shenzhen": "cn-shenzhen", "hong kong": "cn-hongkong",
    "singapore": "ap-southeast-1", "frankfurt": "eu-central-1", "silicon valley": "us-west-1", "tokyo": "ap-northeast-1",
}

# Things people ask for that the engine cannot generate: (pattern, name reported in ``unmapped``).
UNMAPPED_PATTERNS: list[tuple[str, str]] = [
    (r"(?<!\.)\bcdn\b(?!\.)|内容分发", "CDN"),  # not a label of a domain name (cdn.example.com)
    (r"elastic ?search(?:\s+cluster)?", "Elasticsearch"),
    (r"\bkafka\b(?:\s+cluster)?", "Kafka"),
    (r"rocket ?mq|rabbit ?mq|message queue|消息队列", "Message queue"),
    (r"\bwaf\b|web application firewall", "WAF"),
    (r"cloud firewall|云防火墙", "Cloud Firewall"),
    (r"vpn(?:\s+gateway)?", "VPN gateway"),
    (r"\bcen\b|cloud enterprise network", "CEN"),
    (r"api gateway|api网关", "API Gateway"),
    (r"\bram users?\b|ram ?用户", "RAM user"),
    (r"\bssl certificate|证书", "SSL certificate"),
    # Plain HTTP/TCP listeners are generated with the load balancer; an HTTPS one needs a certificate.
    (r"\bhttps\s+listeners?\b|https\s*监听", "HTTPS listener (needs an SSL certificate)"),
]

_BLOCK_PATTERNS: dict[str, str] = {
    "vpc": r"\bvpcs?\b|专有网络|virtual private cloud",
    "vswitch": r"v-?switch(?:es)?|交换机|subnets?|子网",
    "security_group": r"security group|安全组|firewall rules?|防火墙",
    "ecs": (r"\becs\b|ecs\.[a-z0-9]+\.|(?<!sql )\bservers?\b|\bvms?\b"
            r"|virtual machines?|\binstances?\b|云服务器|服务器|虚拟机|主机|实例"),
    "alb": r"\balb\b|application load balancer|应用型负载均衡",
    "nlb": r"\bnlb\b|network load balancer|网络型负载均衡",
    "slb": r"\bslb\b|\bclb\b|load balancer|负载均衡",
    "nat": r"\bnat\b|nat ?网关",
    "eip": r"\beips?\b|elastic ip|弹性公网|弹性ip",
    "rds": r"\brds\b|mysql|postgres(?:ql)?|\bpg\b|sql ?server|mssql|mariadb|\bdatabase\b|\bdb\b|数据库",
    "redis": r"redis|kvstore|\btair\b|缓存",
    "oss": r"\boss\b|buckets?|object storage|对象存储|存储桶",
    "kms": r"\bkms\s+keys?\b|customer master key|\bcmks?\b|kms\s*密钥|(?<!ssh )\bencryption keys?\b|加密密钥|主密钥",
    "sls": r"log service|\bsls\b|日志服务|\blog ?stores?\b|日志库|\blog project\b|日志项目",
    "mongodb": r"mongo ?db|\bmongo\b|\bdds\b",
    "nas": r"\bnas\b|file ?system|文件存储|文件系统|shared (?:file )?storage|\bnfs\b|\bsmb share\b",
    "ack": r"\b(?:kubernetes|k8s|ack)\b|容器服务|k8s集群",
    "ess": r"auto ?scal(?:ing|ed)|scaling group|\bess\b|弹性伸缩|伸缩组|autoscal",
    "fc": (r"function compute|\bfc\b|函数计算|函数|serverless functions?"
           r"|\bfunctions?\b(?=.*\b(?:http|trigger|python|node|java|go)\b)"
           r"|\b(?:python|node(?:\.?js)?|java|golang|go)\b[\w. ]{0,12}\bfunctions?\b"),
    "ram": r"\bram (?:roles?|polic(?:y|ies))\b|\b(?:iam|instance|service) roles?\b|ram ?角色|权限策略|授权策略|实例角色",
    "dns": (r"\bdns\b|\balidns\b|云解析|解析记录|域名解析|domain (?:name )?record|\b(?:a|aaaa|cname|txt|mx) records?\b"
            r"|\b(?:a|aaaa|cname|txt|mx)\s*记录"),
    "polardb": r"polar ?db",
}
# What names another database engine, so that "PolarDB MySQL" or "a MongoDB database" is not also an RDS instance.
_OTHER_DATABASES = re.compile(r"polar ?db(?:\s*(?:for\s+)?(?:mysql|postgres(?:ql)?|pg))?(?:\s*\d+(?:\.\d+)?)?"
                              r"(?:\s*(?:database|db|cluster|数据库|集群))?|(?:mongo ?db|\bmongo\b)(?:\s*\d+(?:\.\d+)?)?"
                              r"(?:\s*(?:database|db|数据库))?", re.IGNORECASE)
_DB_INSTANCE_PHRASE = re.compile(
    r"(?:rds|redis|kvstore|mysql|postgres(?:ql)?|pg|sql ?server|database|db|cache|mongo ?db|\bmongo|polar ?db|数据库|缓存)"
    r"\s*(?:[\w.]+\s+)?(?:instances?|实例)",
    re.IGNORECASE)
_REMOVE = (r"(?:\b(?:remove|delete|drop|without|get rid of|no(?:\s+more|\s+longer\s+(?:need|want))?|(?:don't|do not) need)\b"
           r"|删除|去掉|移除|不要|不需要)\s*(?:the\s+|a\s+|an\s+|all\s+)?")
_ADD_WORDS = re.compile(r"\b(?:add|another|more|extra|additional)\b|增加|再加|添加|新增|再", re.IGNORECASE)


# ---------------------------------------------------------------- small parsing helpers


def _number(word: str) -> int:
    """An integer from digits or an English/Chinese number word (unknown words count as 1)."""
    word = word.lower()
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)


def _has(text: str, pattern: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _mentions(block: str, text: str) -> bool:
    """Whether the text mentions a building block (database/cache "instances" are not ECS instances)."""
    if block == "ecs":
        text = _DB_INSTANCE_PHRASE.sub(" ", text)
        if _has(text, _BLOCK_PATTERNS["ack"]):  # a cluster's node types and nodes are its node pool's, not instances
            text = re.sub(r"\becs\.[\w.-]+|\b(?:worker\s+)?nodes?\b|节点|node ?pools?|节点池", " ", text, flags=re.IGNORECASE)
        text = re.sub(r"\binstance roles?\b|实例角色", " ", text, flags=re.IGNORECASE)
    if block == "rds":
        text = _OTHER_DATABASES.sub(" ", text)
    if block == "slb":
        text = re.sub(r"(?:application|network) load balancer|应用型负载均衡|网络型负载均衡", " ", text, flags=re.IGNORECASE)
    return _has(text, _BLOCK_PATTERNS[block])


def _removes(block: str, text: str) -> bool:
    """Whether the text asks to remove a block ("remove the NAT gateway", "不要Redis")."""
    pattern = _BLOCK_PATTERNS[block]
    return _has(text, rf"{_REMOVE}(?:{pattern})") and not _has(text, rf"\badd\b[^.]*(?:{pattern})")


def _count_before(text: str, nouns: str) -> int | None:
    """The count written just before ``nouns`` ("two vSwitches", "3台服务器", "2 more ECS"), if any."""
    pattern = rf"(?<![A-Za-z0-9.]){_NUM}\s*(?:个|台|x\s*)?\s*(?:(?:more|extra|additional|new)\s+)?(?:{nouns})"
    match = re.search(pattern, text, re.IGNORECASE)
    return _number(match.group(1)) if match else None


def region_of(text: str) -> str | None:
    """An Alibaba Cloud region id (or a well-known city name) mentioned in the text."""
    match = _REGION.search(text)
    if match:
        return match.group(1).lower()
    zone = _ZONE.search(text)
    if zone:
        return zone.group(1).lower().rsplit("-", 1)[0]
    lowered = text.lower()
    for name, region in REGION_NAMES.items():
        if name in lowered:
            return region
    return None


def normalize(prompt: str) -> str:
    """Space out CJK/ASCII boundaries ("两台ECS服务器" -> "两台 ECS 服务器") so ``\\b`` works in every pattern."""
    return re.sub(r"(?<=[\u4e00-\u9fff])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[\u4e00-\u9fff])", " ", prompt)


def _unmapped(text: str) -> tuple[list[str], str]:
    """Names of unsupported things asked for, and the text with them blanked out (so they map to nothing else)."""
    found: list[str] = []
    for pattern, name in UNMAPPED_PATTERNS:
        if _has(text, pattern):
            if name not in found:
                found.append(name)
            text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return found, text


def _clauses(text: str) -> list[str]:
    """Split a request into clauses, keeping "80, 443" lists together."""
    splitter = (r"[;；。\n]|[,，](?!\s*\d)|\bwhile\b|\bbut\b|\bplus\b"
                r"|\band\b(?=\s+(?:ssh|rdp|https?|icmp|ping|open|allow|ports?)\b)")
    return [part for part in re.split(splitter, text, flags=re.IGNORECASE) if part and part.strip()]


# ---------------------------------------------------------------- network


def _cidrs(text: str) -> tuple[str | None, list[str], list[str]]:
    """(VPC CIDR, vSwitch CIDRs, source CIDRs) written in the text."""
    vpc: str | None = None
    vswitches: list[str] = []
    sources: list[str] = []
    last: list[str] | None = None
    last_end = 0
    for match in _CIDR.finditer(text):
        cidr = match.group(1)
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        before = text[max(0, match.start() - 40):match.start()].lower()
        if last is not None and re.search(r"^\s*(?:,|，|、|and|or|和|及|与)\s*$", text[last_end:match.start()]):
            target = last  # a list continues: "vSwitches 10.1.1.0/24 and 10.1.2.0/24", "from 10.0.0.0/8, 172.16.0.0/12"
        elif re.search(r"(?:from|source|only|允许|来自|来源|仅)\s*(?:ip\s*|cidr\s*|the\s+)?(?:range\s*)?$", before):
            target = sources
        elif re.search(r"(?:v-?switch(?:es)?|交换机|subnets?|子网)[^/]*$", before):
            target = vswitches
        elif vpc is None:
            vpc = cidr
            last, last_end = None, match.end()
            continue
        else:
            target = vswitches
        target.append(cidr)
        last, last_end = target, match.end()
    return vpc, vswitches, sources


def _parse_network(text: str, delta: dict[str, Any]) -> None:
    """VPC CIDR, vSwitch count/CIDRs/zones and region into ``delta``."""
    vpc_cidr, vsw_cidrs, _ = _cidrs(text)
    if vpc_cidr:
        delta["vpc_cidr"] = vpc_cidr
    if vsw_cidrs:
        delta["vswitch_cidrs"] = vsw_cidrs
    zones = [zone.lower() for zone in _ZONE.findall(text)]
    if zones:
        delta["zones"] = list(dict.fromkeys(zones))
    region = region_of(text)
    if region:
        delta["region"] = region
    count = _count_before(text, r"v-?switch(?:es)?|交换机|subnets?|子网")
    multi_zone = (r"(?:two|2|multiple|多个|两个|双)\s*(?:availability\s+)?(?:zones|可用区)|multi-?(?:zone|az)"
                  r"|high availability|highly available|高可用")
    if count is None and _has(text, multi_zone):
        count = 2
    if count is not None:
        relative = bool(_ADD_WORDS.search(text)) and _mentions("vswitch", text)
        removing = _has(text, rf"{_REMOVE}(?:\w+\s+)?(?:v-?switch|交换机|subnet)")
        delta["vswitch_count"] = (-count if removing else count, relative or removing)


# ---------------------------------------------------------------- security group rules

_NAMED_PORTS = [(r"\bssh\b", "22/22"), (r"\brdp\b|remote desktop|远程桌面", "3389/3389"), (r"\bhttps\b", "443/443"),
                (r"\bhttp\b(?!s)", "80/80"), (r"\bping\b|\bicmp\b", "-1/-1")]
_PORT_ITEM = (r"\d{1,5}(?:\s*(?:-|~|to)\s*\d{1,5})?"
              r"(?!\d|\.\d|\s*(?:gb|g\b|个|台|x\b|vcpu|core|ecs|instances?|servers?|v-?switch|交换机))")
_PORT_LIST = rf"({_PORT_ITEM}(?:\s*(?:,|，|、|/|and|&|和|及|与|or)\s*(?:ports?\s*)?{_PORT_ITEM})*)"
_PORT_CONTEXTS = [
    re.compile(rf"(?:open|allow|expose|开放|放行|放通|允许|打开)\s*(?:the\s+)?(?:inbound\s+)?(?:tcp\s+|udp\s+)?(?:ports?\s*|端口\s*)?{_PORT_LIST}",
               re.IGNORECASE),
    re.compile(rf"(?:ports?|端口)\s*:?\s*{_PORT_LIST}", re.IGNORECASE),
    re.compile(rf"{_PORT_LIST}\s*(?:端口|ports?\b)", re.IGNORECASE),
]


def _ports(clause: str) -> list[str]:
    """Port ranges ("22/22", "8000/8080") mentioned in one clause."""
    ranges: list[str] = []
    for pattern, port_range in _NAMED_PORTS:
        if _has(clause, pattern):
            ranges.append(port_range)
    for context in _PORT_CONTEXTS:
        for match in context.finditer(clause):
            for item in re.findall(r"(\d{1,5})(?:\s*(?:-|~|to)\s*(\d{1,5}))?", match.group(1)):
                low, high = int(item[0]), int(item[1] or item[0])
                if 0 < low <= high <= 65535:
                    ranges.append(f"{low}/{high}")
    return list(dict.fromkeys(ranges))


def _explicit_source(clause: str) -> str | None:
    """The source CIDR a clause opens ports to, if it says so."""
    _, _, sources = _cidrs(clause)
    if sources:
        return sources[0]
    if _has(clause, r"anywhere|any ip|the internet|the world|everyone|public(?:ly)?|0\.0\.0\.0/0|任意|任何|所有ip|公网|互联网"):
        return ANYWHERE
    return None


def _parse_rules(text: str) -> list[dict[str, str]]:
    """Ingress rules: ports per clause with their source (secure default: admin ports only from the VPC)."""
    clauses = _clauses(text)
    # A source said in a clause of its own ("..., only from 10.0.0.0/8") applies to the ports of the other clauses.
    loose = {source for clause in clauses if not _ports(clause) for source in [_explicit_source(clause)] if source}
    fallback = loose.pop() if len(loose) == 1 else None
    rules: list[dict[str, str]] = []
    for clause in clauses:
        source = _explicit_source(clause) or fallback
        protocol = "udp" if _has(clause, r"\budp\b") else "tcp"
        for port_range in _ports(clause):
            rule_protocol = "icmp" if port_range == "-1/-1" else protocol
            rule = {"protocol": rule_protocol, "port_range": port_range, "source": source or ""}
            if rule not in rules:
                rules.append(rule)
    return rules


# ---------------------------------------------------------------- compute and data services

_IMAGES = [
    (r"ubuntu", "ubuntu_22_04_x64_20G_alibase_20240807.vhd"),
    (r"centos", "centos_7_9_x64_20G_alibase_20240628.vhd"),
    (r"debian", "debian_12_6_x64_20G_alibase_20240823.vhd"),
    (r"windows", "win2022_21H2_x64_dtc_en-us_40G_alibase_20240816.vhd"),
    (r"alibaba cloud linux|aliyun linux|alinux", "aliyun_3_x64_20G_alibase_20240819.vhd"),
]
DEFAULT_IMAGE = "aliyun_3_x64_20G_alibase_20240819.vhd"
_ECS_NOUNS = (r"(?:(?:web|app|application|backend|frontend|worker|linux|ubuntu|centos|debian|windows|alibaba cloud linux"
              r"|private|public|small|large|identical)\s+){0,2}(?:ecs\s+)?"
              r"(?:instances?|servers?|vms?|virtual machines?|ecs|云服务器|服务器|ecs实例|实例|主机|虚拟机)")


def _size(text: str, nouns: str) -> int | None:
    """A size in GB written next to ``nouns`` ("40 GB system disk", "system disk of 40GB", "系统盘40G")."""
    for pattern in (rf"(\d+)\s*(?:gb|gib|g)\b\s*(?:of\s+)?(?:{nouns})",
                    rf"(?:{nouns})\s*(?:size\s*)?(?:of|:|=|为)?\s*(\d+)\s*(?:gb|gib|g)?",
                    rf"(\d+)\s*(?:gb|gib|g)(?:的)?(?:{nouns})"):
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return int(match.group(1))
    return None


def _parse_ecs(text: str, previous: dict[str, Any] | None) -> dict[str, Any]:
    """ECS instance settings written in the text (only what is mentioned)."""
    ecs: dict[str, Any] = {}
    stripped = _DB_INSTANCE_PHRASE.sub(" ", text)
    count = _count_before(stripped, _ECS_NOUNS)
    if count is not None:
        relative = previous is not None and bool(_ADD_WORDS.search(stripped))
        ecs["count"] = (count, relative)
    instance_type = re.search(r"\b(ecs\.[a-z0-9-]+\.[a-z0-9]+)\b", text, re.IGNORECASE)
    if instance_type:
        ecs["instance_type"] = instance_type.group(1).lower()
    image = re.search(r"\b(m-[a-z0-9]{8,})\b|\b([\w.-]+\.vhd)\b", text, re.IGNORECASE)
    if image:
        ecs["image"] = image.group(1) or image.group(2)
    else:
        for pattern, image_id in _IMAGES:
            if _has(text, pattern):
                ecs["image"] = image_id
                break
    system_disk = _size(text, r"system disks?|系统盘")
    if system_disk:
        ecs["system_disk"] = system_disk
    # "a 100 GB cloud disk" is a data disk too: only a system disk is named so.
    data_disk = _size(text, r"data disks?|(?:cloud|essd|ssd|extra|additional|second)\s+disks?|数据盘|云盘")
    if data_disk:
        ecs["data_disk"] = data_disk
    return ecs


_RDS_DEFAULTS = {
    "MySQL": ("8.0", "mysql.n2.medium.1"),
    "PostgreSQL": ("14.0", "pg.n2.medium.1"),
    "SQLServer": ("2019_std_ha", "mssql.x4.medium.s2"),
    "MariaDB": ("10.3", "mariadb.n2.medium.2c"),
}


def _parse_rds(text: str) -> dict[str, Any]:
    """RDS engine, version, class and storage written in the text."""
    rds: dict[str, Any] = {}
    if _has(text, r"sql ?server|mssql"):
        rds["engine"] = "SQLServer"
        version = re.search(r"sql ?server\s*(20\d\d)", text, re.IGNORECASE)
        if version:
            rds["version"] = f"{version.group(1)}_std_ha"
    elif _has(text, r"postgres|\bpg\b|pgsql"):
        rds["engine"] = "PostgreSQL"
        version = re.search(r"(?:postgres(?:ql)?|pg)\s*v?(\d{2})(?:\.\d)?", text, re.IGNORECASE)
        if version:
            rds["version"] = f"{version.group(1)}.0"
    elif _has(text, r"mariadb"):
        rds["engine"] = "MariaDB"
    elif _has(text, r"mysql"):
        rds["engine"] = "MySQL"
        version = re.search(r"mysql\s*v?(\d\.\d)", text, re.IGNORECASE)
        if version:
            rds["version"] = version.group(1)
    db_class = re.search(r"\b((?:mysql|pg|mssql|rds|mariadb)\.[a-z0-9]+(?:\.[a-z0-9]+)+)\b", text, re.IGNORECASE)
    if db_class:
        rds["class"] = db_class.group(1).lower()
    storage = _size(text, r"(?:of\s+)?(?:database\s+|db\s+)?storage|存储空间|存储")
    if storage:
        rds["storage"] = storage
    account = re.search(r"(?:(?:database|db)\s+)?(?:account|user(?:name)?|账号|用户)\s*(?:named|called|name|名为|名称为|叫)?\s*"
                        r"[\"'`]?([a-z][a-z0-9_]{1,31})[\"'`]?(?=\W|$)", text, re.IGNORECASE)
    if account and account.group(1).lower() not in _NOT_NAMES:
        rds["account"] = account.group(1).lower()
    if _has(text, r"highly available|high availability|\bha\b|multi-?zone|multi-?az|across (?:two|2|multiple) zones"
                  r"|高可用|多可用区|双可用区"):
        rds["ha"] = True
    whitelist = re.search(r"(?:white ?list|allow(?:ed|ing)?\s+(?:access\s+)?from|白名单|允许)\s*(?:of|:|为)?\s*"
                          r"((?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?)", text, re.IGNORECASE)
    if whitelist:
        rds["whitelist"] = whitelist.group(1)
    return rds


_NOT_NAMES = {"with", "and", "for", "that", "to", "in", "named", "called", "name", "password", "of", "the", "a", "an"}


def _parse_redis(text: str) -> dict[str, Any]:
    redis: dict[str, Any] = {}
    version = re.search(r"redis\s*v?(\d\.\d)", text, re.IGNORECASE)
    if version:
        redis["version"] = version.group(1)
    redis_class = re.search(r"\b(redis\.[a-z0-9]+(?:\.[a-z0-9]+)+)\b", text, re.IGNORECASE)
    if redis_class:
        redis["class"] = redis_class.group(1).lower()
    else:
        memory = (re.search(r"(?:memory|ram|内存)\s*(?:of\s+|为|:)?\s*(\d+)\s*(?:gb|gib|g)\b", text, re.IGNORECASE)
                  or re.search(r"(\d+)\s*(?:gb|gib|g)\s*(?:of\s+)?(?:memory|ram|内存)", text, re.IGNORECASE)
                  # "Redis 7.0 with 4 GB": a size in the same clause, not a disk's or the storage's
                  or re.search(r"redis(?:(?!\band\b|[,，;；]).){0,40}?(\d+)\s*(?:gb|gib|g)\b"
                               r"(?!\s*(?:of\s+)?(?:\w+\s+)?(?:disks?|storage|云盘|磁盘|存储))", text, re.IGNORECASE))
        if memory:
            redis["class"] = _redis_class(int(memory.group(1)))
    return redis


# Standard (master-replica) KVStore classes by memory in GB: the smallest that holds the request.
_REDIS_CLASSES = [(1, "redis.master.small.default"), (2, "redis.master.mid.default"), (4, "redis.master.stand.default"),
                  (8, "redis.master.large.default"), (16, "redis.master.2xlarge.default"),
                  (32, "redis.master.4xlarge.default")]


def _redis_class(gigabytes: int) -> str:
    return next((name for size, name in _REDIS_CLASSES if gigabytes <= size), _REDIS_CLASSES[-1][1])


def _parse_oss(text: str) -> dict[str, Any]:
    oss: dict[str, Any] = {}
    name = re.search(r"(?:bucket|存储桶)[，,]?\s*(?:named|called|name|名为|名称为|叫)?\s*"
                     r"[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)", text, re.IGNORECASE)
    if name and name.group(1).lower() not in {"with", "and", "for", "that", "to", "in", "named", "called"}:
        oss["name"] = name.group(1).lower()
    if _has(text, r"\bkms\b"):
        oss["encryption"] = "KMS"
    if _has(text, r"public[- ]read|公共读"):
        oss["acl"] = "public-read"
    if _has(text, r"versioning|versioned|多版本|版本控制"):
        oss["versioning"] = True
    expire = (re.search(r"(?:expire|delete|remove|过期|删除)\w*\s*(?:objects?\s*|files?\s*)?(?:after|in|older than)?\s*(\d+)\s*"
                        r"(?:days?|天)", text, re.IGNORECASE)
              or re.search(r"(\d+)\s*(?:days?|天)\s*(?:后)?(?:过期|删除|expiry|expiration)", text, re.IGNORECASE)
              or re.search(r"lifecycle[^.;,，。]*?(\d+)\s*(?:days?|天)", text, re.IGNORECASE))
    if expire and 0 < int(expire.group(1)) <= 36_500:
        oss["expire_days"] = int(expire.group(1))
    return oss


def _first(pattern: str, text: str) -> str | None:
    """The first group of the first match of ``pattern`` (case-insensitive), or None."""
    match = re.search(pattern, text, re.IGNORECASE)
    return match.group(1) if match else None


def _put_found(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def _parse_mongodb(text: str) -> dict[str, Any]:
    """MongoDB version ("MongoDB 6.0"), class ("dds.mongo.mid") and storage."""
    mongo: dict[str, Any] = {}
    _put_found(mongo, "version", _first(r"mongo ?(?:db)?\s*v?(\d\.\d)", text))
    db_class = _first(r"\b(dds\.mongo\.[a-z0-9]+(?:\.[a-z0-9]+)*)\b", text)
    _put_found(mongo, "class", db_class.lower() if db_class else None)
    _put_found(mongo, "storage", _size(text, r"(?:of\s+)?storage|存储空间|存储"))
    return mongo


def _parse_polardb(text: str) -> dict[str, Any]:
    """PolarDB engine (MySQL or PostgreSQL), version and node class."""
    polar: dict[str, Any] = {}
    if _has(text, r"polar ?db\s*(?:for\s+)?(?:postgres(?:ql)?|pg)\b"):
        polar["engine"] = "PostgreSQL"
        _put_found(polar, "version", _first(r"(?:postgres(?:ql)?|pg)\s*v?(\d{2})", text))
    else:
        _put_found(polar, "version", _first(r"mysql\s*v?(\d\.\d)", text))
    node_class = _first(r"\b(polar\.(?:mysql|pg)\.[a-z0-9]+(?:\.[a-z0-9]+)*)\b", text)
    _put_found(polar, "class", node_class.lower() if node_class else None)
    return polar


# Suffixes under which a registered domain has three labels (example.com.cn).
_NOT_DOMAINS = re.compile(r"^(?:ecs|redis|mysql|pg|mssql|polar|dds|slb|rds|mariadb)\.", re.IGNORECASE)


def _parse_dns(text: str) -> dict[str, Any]:
    """A DNS record: its full name ("www.example.com"), type and value (an address, a host, or our load balancer)."""
    dns: dict[str, Any] = {}
    names = [n for n in re.findall(r"\b((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})\b", text, re.IGNORECASE)
             if not _NOT_DOMAINS.match(n) and not re.fullmatch(r"[\d.]+", n)]
    target = re.search(r"(?:to|pointing to|points to|resolv\w* to|指向|解析到)\s*((?:\d{1,3}\.){3}\d{1,3}|"
                       r"(?:[a-z0-9-]+\.)+[a-z]{2,24})", text, re.IGNORECASE)
    if names:
        name = names[0].lower()
        if target and target.group(1).lower() == name and len(names) > 1:
            name = names[1].lower()
        dns["name"] = name
    if target and target.group(1).lower() != dns.get("name"):
        dns["value"] = target.group(1).lower()
    kind = re.search(r"\b(aaaa|cname|txt|mx|a)\s+records?\b", text, re.IGNORECASE)
    if kind:
        dns["type"] = kind.group(1).upper()
    ttl = re.search(r"\bttl\s*(?:of|=|:)?\s*(\d+)", text, re.IGNORECASE)
    if ttl:
        dns["ttl"] = int(ttl.group(1))
    return dns


_RAM_PRINCIPALS = [(r"function compute|\bfc\b|函数计算", "fc.aliyuncs.com"),
                   (r"\back\b|kubernetes|\bk8s\b|容器服务", "cs.aliyuncs.com"),
                   (r"\bros\b|resource orchestration|资源编排", "ros.aliyuncs.com"),
                   (r"\becs\b|instances?|servers?|实例|服务器", "ecs.aliyuncs.com")]


def _parse_ram(text: str) -> dict[str, Any]:
    """A RAM role: who assumes it (ECS, FC, ACK, ROS) and the access its policy grants, as written."""
    ram: dict[str, Any] = {}
    name = re.search(r"(?:role|角色)\s*(?:named|called|name|名为|叫)\s*[\"'`]?([a-z][a-z0-9-]{1,63})[\"'`]?", text, re.IGNORECASE)
    if name:
        ram["name"] = name.group(1)
    lower = text.lower()
    for pattern, service in _RAM_PRINCIPALS:
        if re.search(pattern, lower):
            ram["principal"] = service
            break
    read_only = _has(text, r"read[- ]?only|\bread\b|只读|读取")
    actions: list[str] = []
    if _has(text, r"\boss\b|buckets?|对象存储"):
        actions += ["oss:GetObject", "oss:ListObjects"] if read_only else ["oss:GetObject", "oss:ListObjects",
                                                                            "oss:PutObject", "oss:DeleteObject"]
    if _has(text, r"\bkms\b|decrypt|解密"):
        actions += ["kms:Decrypt"]
    if _has(text, r"log service|\bsls\b|\blogs?\b|日志"):
        actions += ["log:GetLogStoreLogs"] if read_only else ["log:PostLogStoreLogs"]
    if actions:
        ram["actions"] = actions
    bucket = re.search(r"bucket\s*(?:named|called|name|名为)?\s*[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)", text,
                       re.IGNORECASE)
    if bucket and bucket.group(1).lower() not in _NOT_NAMES:
        ram["bucket"] = bucket.group(1).lower()
    return ram



# In a RAM request, who assumes the role and what it may access are not things to create.
_RAM_CONTEXT = re.compile(
    r"(?:for|used by|assumed by|给|供)\s*(?:the\s+)?(?:\w+\s+)?(?:ecs(?:\s+instances?)?|instances?|servers?|function compute"
    r"|\bfc\b|\back\b|kubernetes|\bros\b)(?!\s*roles?\b)"
    r"|(?:函数计算|容器服务|ecs ?实例|实例|服务器)\s*(?:使用的|用的|使用)"
    r"|(?:(?:read[- ]?only|full|write|read)\s+)?access\s+to\s+(?:the\s+)?(?:oss\s+buckets?|buckets?|oss|kms|log service|logs?)"
    r"(?:\s+(?:named|called)\s+[\w-]+)?",
    re.IGNORECASE)


_FC_RUNTIMES = [(r"python\s*3\.12", "python3.12"), (r"python\s*3\.9", "python3.9"), (r"python", "python3.10"),
                (r"node(?:\.?js)?\s*20", "nodejs20"), (r"node(?:\.?js)?", "nodejs18"), (r"\bjava\s*8\b", "java8"),
                (r"\bjava\b", "java11"), (r"\bgo(?:lang)?\b", "go1"), (r"\bphp\b", "php7.2")]


def _parse_ess(text: str) -> dict[str, Any]:
    """Auto scaling bounds: "between 2 and 10", "min 2 max 10", "from 2 to 10 instances", "最少2台最多10台"."""
    ess: dict[str, Any] = {}
    pair = (re.search(r"between\s+(\d+)\s+and\s+(\d+)", text, re.IGNORECASE)
            or re.search(r"(?:from|scal\w*\s+from)\s+(\d+)\s+(?:to|up to)\s+(\d+)", text, re.IGNORECASE)
            or re.search(r"(\d+)\s*(?:-|~|到|至)\s*(\d+)\s*(?:台|个|instances?|servers?)", text, re.IGNORECASE))
    if pair:
        ess["min"], ess["max"] = int(pair.group(1)), int(pair.group(2))
    low = re.search(r"(?:min(?:imum)?|at least|最少|最小)\s*(?:of|=|:|为)?\s*(\d+)", text, re.IGNORECASE)
    high = re.search(r"(?:max(?:imum)?|at most|up to|最多|最大)\s*(?:of|=|:|为)?\s*(\d+)", text, re.IGNORECASE)
    if low:
        ess["min"] = int(low.group(1))
    if high:
        ess["max"] = int(high.group(1))
    return ess


def _parse_ack(text: str) -> dict[str, Any]:
    """An ACK managed cluster: node count, node instance type, Kubernetes version, a public API endpoint if asked."""
    ack: dict[str, Any] = {}
    nodes = re.search(r"(\d+|\w+)\s*(?:worker\s+)?(?:nodes?|个节点|台节点|节点)", text, re.IGNORECASE)
    if nodes:
        count = int(nodes.group(1)) if nodes.group(1).isdigit() else NUMBER_WORDS.get(nodes.group(1).lower())
        if count and 0 < count <= 100:
            ack["nodes"] = count
    node_type = re.search(r"\b(ecs\.[a-z0-9-]+\.[a-z0-9]+)\b", text, re.IGNORECASE)
    if node_type:
        ack["node_type"] = node_type.group(1).lower()
    version = re.search(r"(?:kubernetes|k8s|ack)\s*v?(1\.\d{2}(?:\.\d+)?)", text, re.IGNORECASE)
    if version:
        ack["version"] = version.group(1)
    if _has(text, r"public (?:api|endpoint)|api server .*(?:public|internet)|公网访问|公网api"):
        ack["public_api"] = True
    return ack


_FC_HTTP = re.compile(r"(?:public\s+|anonymous\s+)?https?\s+(?:triggers?|endpoints?)|(?:公开的?)?\s*https?\s*触发器",
                      re.IGNORECASE)


def _parse_fc(text: str) -> dict[str, Any]:
    """Function Compute: runtime, memory, timeout, names, an HTTP trigger (anonymous only when asked)."""
    fc: dict[str, Any] = {}
    for pattern, runtime in _FC_RUNTIMES:
        if _has(text, pattern):
            fc["runtime"] = runtime
            break
    memory = re.search(r"(\d+)\s*(?:mb|m)\b(?:\s*(?:of\s+)?(?:memory|ram|内存))?", text, re.IGNORECASE)
    if memory and 128 <= int(memory.group(1)) <= 32768:
        fc["memory"] = int(memory.group(1))
    timeout = re.search(r"(?:timeout|超时)\s*(?:of|=|:|为)?\s*(\d+)\s*(?:s|sec|seconds?|秒)?\b", text, re.IGNORECASE)
    if timeout and 1 <= int(timeout.group(1)) <= 86400:
        fc["timeout"] = int(timeout.group(1))
    name = re.search(r"function\s*(?:named|called|name|名为|叫)\s*[\"'`]?([a-z][a-z0-9_-]{1,63})[\"'`]?", text, re.IGNORECASE)
    if name:
        fc["function"] = name.group(1)
    if _has(text, r"\bhttp\b|\bhttps? trigger|\bapi\b|web ?hook|\burl\b|http触发器|触发器"):
        fc["http"] = True
    if _has(text, r"anonymous|public(?:ly)?|without auth|no auth|匿名|公开"):
        fc["anonymous"] = True
    return fc


def _parse_nas(text: str) -> dict[str, Any]:
    """NAS protocol (NFS, or SMB for Windows shares) and storage type (performance or capacity)."""
    nas: dict[str, Any] = {}
    if _has(text, r"\bsmb\b|windows (?:file )?share|cifs"):
        nas["protocol"] = "SMB"
    elif _has(text, r"\bnfs\b"):
        nas["protocol"] = "NFS"
    if _has(text, r"capacity|容量型"):
        nas["storage"] = "Capacity"
    elif _has(text, r"performance|性能型"):
        nas["storage"] = "Performance"
    return nas


def _parse_sls(text: str) -> dict[str, Any]:
    """Log Service: project and logstore names, retention ("keep logs for 90 days", "保存30天"), shards."""
    sls: dict[str, Any] = {}
    project = re.search(r"(?:log\s+)?project\s*(?:named|called|name|名为|叫)?\s*[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)",
                        text, re.IGNORECASE)
    if project and project.group(1).lower() not in _NOT_NAMES:
        sls["project"] = project.group(1).lower()
    store = re.search(r"log ?store\s*(?:named|called|name|名为|叫)?\s*[\"'`]?([a-z0-9][a-z0-9_-]{2,62})[\"'`]?(?=\W|$)",
                      text, re.IGNORECASE)
    if store and store.group(1).lower() not in _NOT_NAMES:
        sls["logstore"] = store.group(1).lower()
    ttl = (re.search(r"(?:keep|retain|retention|store|保存|保留)\w*\s*(?:logs?\s*)?(?:for|of|:)?\s*(\d+)\s*(?:days?|天)", text,
                     re.IGNORECASE)
           or re.search(r"(\d+)\s*(?:days?|天)\s*(?:of\s+)?(?:retention|保存|保留)", text, re.IGNORECASE))
    if ttl and 0 < int(ttl.group(1)) <= 3650:
        sls["ttl"] = int(ttl.group(1))
    shards = re.search(r"(\d+)\s*(?:shards?|个分片|分片)", text, re.IGNORECASE)
    if shards and 0 < int(shards.group(1)) <= 256:
        sls["shards"] = int(shards.group(1))
    return sls


def _parse_tags(text: str) -> dict[str, str]:
    """Tags asked for: "tags environment=prod, owner=alice" or "add tags for environment and owner"."""
    match = re.search(r"(?:tags?|标签)\s*(.*)$", text, re.IGNORECASE | re.DOTALL)
    if not match:
        return {}
    clause = re.split(r"[.;。；\n]", match.group(1))[0]
    pairs = dict(re.findall(r"([A-Za-z][\w-]*)\s*[=:：]\s*([\w.@-]+)", clause))
    if pairs:
        return pairs
    stop = {"for", "with", "of", "and", "the", "a", "an", "to", "all", "every", "each", "resources", "resource", "on", "keys",
            "key", "values", "value", "tag", "tags", "add", "include", "set", "it", "them"}
    keys = [word for word in re.findall(r"[A-Za-z][\w-]*", clause) if word.lower() not in stop]
    chinese = {"环境": "environment", "负责人": "owner", "所有者": "owner", "项目": "project"}
    keys += [key for word, key in chinese.items() if word in clause]
    environment = "prod" if _has(text, r"\bprod") else "dev"
    defaults = {"environment": environment, "env": environment, "owner": "iac-code", "project": "iac-code"}
    return {key: defaults.get(key.lower(), "iac-code") for key in dict.fromkeys(keys)}


def _format_of(text: str) -> str | None:
    if _has(text, r"terraform|\bhcl\b|\btf\b"):
        return "terraform"
    if _has(text, r"\bjson\b"):
        return "ros-json"
    if _has(text, r"\byaml\b|\bros\b|资源编排"):
        return "ros-yaml"
    return None


# ---------------------------------------------------------------- the delta and its application


_EXISTING_VPC = r"\bexisting\s+(?:vpc|network)\b|(?:已有|现有|已经有)的?\s*(?:vpc|专有网络)"


def parse_request(prompt: str, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a request says, as a delta: only mentioned things are present."""
    whole = normalize(prompt)
    ram = _has(whole, _BLOCK_PATTERNS["ram"])
    if ram:  # the role's own name ("named ecs-reader") names nothing to create either
        whole_for_blocks = _RAM_CONTEXT.sub(" ", re.sub(r"((?:role|角色)\s*(?:named|called|名为|叫))\s*[\w-]+", r"\1 ", whole,
                                                        flags=re.IGNORECASE))
    unmapped, text = _unmapped(whole_for_blocks if ram else whole)
    delta: dict[str, Any] = {"unmapped": unmapped, "add": [], "remove": []}
    fmt = _format_of(text)
    if fmt:
        delta["format"] = fmt
    _parse_network(text, delta)
    # An HTTP trigger of a function opens no port of ours.
    rules = _parse_rules(_FC_HTTP.sub(" ", text) if _mentions("fc", text) else text)
    if rules:
        delta["rules"] = rules
    for block in ("vpc", "vswitch", "security_group", "ecs", "alb", "nlb", "slb", "nat", "eip", "rds", "redis", "oss", "kms",
                  "sls", "mongodb", "polardb", "dns", "nas", "ram", "fc", "ack", "ess"):
        if not _mentions(block, text):
            continue
        if previous is not None and _removes(block, text):
            delta["remove"].append(block)
        elif block != "slb" or not (_mentions("alb", text) or _mentions("nlb", text)) or _has(text, r"\bslb\b|\bclb\b"):
            delta["add"].append(block)
    delta["ecs"] = _parse_ecs(text, previous)
    delta["rds"] = _parse_rds(text)
    delta["redis"] = _parse_redis(text)
    delta["oss"] = _parse_oss(text) if "oss" in delta["add"] else {}
    delta["sls"] = _parse_sls(text) if "sls" in delta["add"] else {}
    delta["mongodb"] = _parse_mongodb(text) if "mongodb" in delta["add"] else {}
    delta["polardb"] = _parse_polardb(text) if "polardb" in delta["add"] else {}
    delta["dns"] = _parse_dns(text) if "dns" in delta["add"] else {}
    delta["nas"] = _parse_nas(text) if "nas" in delta["add"] else {}
    delta["ram"] = _parse_ram(whole) if "ram" in delta["add"] else {}
    delta["fc"] = _parse_fc(text) if "fc" in delta["add"] else {}
    delta["ack"] = _parse_ack(text) if "ack" in delta["add"] else {}
    delta["ess"] = _parse_ess(text) if "ess" in delta["add"] else {}
    if "ess" in delta["add"] and "ecs" in delta["add"]:
        delta["add"].remove("ecs")  # the group launches the instances: the ECS words describe its configuration
    if _has(text, r"\b(?:public|internet[- ]facing|公网)\b|公网"):
        delta["public"] = True
    if _has(text, r"\bprivate\b|intranet|internal|内网|私网"):
        delta["public"] = False
    tags = _parse_tags(text)
    if tags:
        delta["tags"] = tags
    if _has(text, _EXISTING_VPC):
        delta["existing_vpc"] = True
    return delta
