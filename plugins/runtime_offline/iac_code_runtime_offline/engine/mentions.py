"""Where a request names catalog resources, what it names outside the catalog, and which mentions create nothing.

A mention is a span of the (normalised) request that names a building block. A mention creates that block
unless it only says *who* uses something, *what* it may access or *where* traffic comes from: a principal
("a RAM role that ECS instances can assume", "给函数计算用的角色"), a target ("allowing oss:GetObject",
"pointing at the SLB", "read access to OSS") or a source ("SSH from the office network", "MySQL 3306 from
the app tier"). ``references`` blanks those out; every blanking keeps the text's length, so positions found in
the blanked text are positions in the request.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from iac_code_runtime_offline.engine.catalog import RESOURCE_TYPES
from iac_code_runtime_offline.engine.quantities import MEASURE, NUMBER, QUANTITY

BLOCK_PATTERNS: dict[str, str] = {
    "vpc": r"\bvpcs?\b|专有网络|私有网络|virtual private cloud",
    "vswitch": r"v-?switch(?:es)?|交换机|\bsubnets?\b|子网",
    "security_group": r"security[- ]groups?|安全组|firewall rules?|(?<!云)防火墙",
    "ecs": (r"ecs\.[a-z0-9-]+\.[a-z0-9]+|\becs\b(?![.-])(?!\s*(?:实例\s*)?角色)|(?<!sql )(?<!tcp )\bservers?\b(?!\s*20\d\d)"
            r"|\bvms?\b"
            r"|virtual machines?|\binstances?\b(?!\s+(?:types?|class(?:es)?|roles?|famil(?:y|ies)|specs?|ids?|names?))"
            r"|\bhosts?\b(?!\s*names?)|(?<!\w)machines?\b|云服务器|服务器|虚拟机|主机|(?<!副本集)实例(?!\s*(?:规格|角色|类型))|机器"),
    "alb": r"\balb\b|application load balancer|应用型负载均衡",
    "nlb": r"\bnlb\b|network load balancer|网络型负载均衡",
    "slb": r"\bslb\b|\bclb\b|load balancers?|负载均衡",
    "nat": r"\bnat\b|nat ?网关",
    "eip": r"\beips?\b|elastic (?:public )?ips?|弹性公网|弹性\s*ip",
    "rds": (r"\brds\b|mysql|postgres(?:ql)?|\bpg\b|sql ?server|mssql|mariadb|\bdatabases?\b|\bdbs?\b|数据库"),
    "redis": r"redis|kvstore|\btair\b|缓存|\bcache\b",
    "oss": r"\boss\b|\bbuckets?\b|object storage|对象存储|存储桶",
    "kms": (r"\bkms\b(?:\s+(?:keys?|cmks?))?(?<!with kms)(?<!using kms)(?<!by kms)(?!\s*(?:encryption|encrypted|加密|-))"
            r"|customer master key|\bcmks?\b|kms\s*密钥|(?<!ssh )\bencryption keys?\b|加密密钥|主密钥"),
    "sls": r"log service|\bsls\b|日志服务|\blog ?stores?\b|日志库|\blog projects?\b|日志项目|\blogging pipeline\b",
    "mongodb": r"mongo ?db|\bmongo\b|\bdds\b",
    "nas": (r"\bnas\b|file ?systems?|文件存储|文件系统|shared (?:file )?storage|\bnfs\b|\bsmb\b(?:\s+(?:file\s+)?shares?)?"
            r"|file shares?"),
    "ack": r"\b(?:kubernetes|k8s|ack)\b|容器服务|container cluster",
    "ess": r"auto ?scal(?:ing|ed)|scaling groups?|\bess\b|弹性伸缩|伸缩组|autoscal",
    "fc": (r"function compute|\bfc\b|函数计算|函数|serverless (?:functions?|api)"
           r"|\bfunctions?\b(?=.*\b(?:http|trigger|python|node|java|go|golang|memory|timeout|runtime)\b)"
           r"|\b(?:python|node(?:\.?js)?|java|golang|go)\b[\w. ]{0,12}\bfunctions?\b"),
    "ram": (r"\bram (?:roles?|polic(?:y|ies))\b|\b(?:iam|instance|service|instance ram) roles?\b|ram\s*角色|权限策略|授权策略"
            r"|实例角色|(?<![\w-])roles?\b|角色"),
    "dns": (r"\bdns\b|\balidns\b|云解析|解析记录|域名解析|domain (?:name )?record|\b(?:a|aaaa|cname|txt|mx) records?\b"
            r"|\b(?:a|aaaa|cname|txt|mx)\s*记录"),
    "polardb": r"polar ?db",
}
# Catalog building block -> the block a request names it by (its resource type names count as mentions).
_TYPE_BLOCK = {"vpc": "vpc", "vswitch": "vswitch", "security_group": "security_group", "security_group_ingress": "security_group",
               "ecs_instance": "ecs", "slb": "slb", "alb": "alb", "nlb": "nlb", "nat_gateway": "nat", "eip": "eip",
               "rds": "rds", "redis": "redis", "oss_bucket": "oss", "mongodb": "mongodb", "polardb": "polardb",
               "nas_file_system": "nas", "ram_role": "ram", "fc_function": "fc", "fc_service": "fc", "ack_cluster": "ack",
               "ess_scaling_group": "ess", "kms_key": "kms", "dns_record": "dns", "sls_project": "sls", "sls_logstore": "sls"}
for _block, _mentioned in _TYPE_BLOCK.items():
    _ros, _tf = RESOURCE_TYPES[_block]
    _names = [re.escape(name) for name in (_ros, _tf) if name]
    BLOCK_PATTERNS[_mentioned] = rf"(?<![\w:])(?:{'|'.join(_names)})(?![\w:])|" + BLOCK_PATTERNS[_mentioned]
BLOCKS = tuple(BLOCK_PATTERNS)

# Things people ask for that the engine cannot generate: (pattern, name reported in ``unmapped``).
UNMAPPED_PATTERNS: list[tuple[str, str]] = [
    (r"(?<![.\w-])cdn(?![.\w-])|内容分发|\bdcdn\b", "CDN"),  # not a label of a domain name (cdn.example.com)
    (r"elastic ?search|\bopensearch\b", "Elasticsearch"),
    (r"\bkafka\b", "Kafka"),
    (r"rocket ?mq|rabbit ?mq|message queue|消息队列|\bmns\b|\bmq\b", "Message queue (RocketMQ/RabbitMQ/Kafka)"),
    (r"\bwaf\b|web application firewall", "WAF"),
    (r"cloud firewall|云防火墙", "Cloud Firewall"),
    (r"\bvpn(?:\s+gateway)?\b|vpn\s*网关", "VPN gateway"),
    (r"\bcen\b|cloud enterprise network|云企业网|transit router", "CEN"),
    (r"api gateway|api\s*网关", "API Gateway"),
    (r"\bram users?\b|ram\s*用户|\baccess ?keys?\b", "RAM user"),
    (r"\bssl certificates?\b|\bcertificates?\b|证书", "SSL certificate"),
    # Plain HTTP/TCP listeners are generated with the load balancer; an HTTPS one needs a certificate.
    (r"\bhttps\s+listeners?\b|https\s*监听", "HTTPS listener (needs an SSL certificate)"),
    (r"click ?house", "ClickHouse"),
    (r"max ?compute|\bodps\b", "MaxCompute"),
    (r"\bbastion ?host\b(?=\s+(?:instance|service))|\bbastionhost\b|云?堡垒机", "Bastionhost"),
    (r"anti-?ddos|ddos (?:protection|防护)|ddos高防|\bddos\b", "Anti-DDoS"),
    (r"table ?store|\bots\b", "Tablestore"),
    (r"analytic ?db(?:\s+for\s+(?:mysql|postgresql))?|\badb\b", "AnalyticDB"),
    (r"hologres", "Hologres"),
    (r"\bsae\b|serverless app engine", "SAE (Serverless App Engine)"),
    (r"\beci\b|elastic container instances?", "ECI (Elastic Container Instance)"),
    (r"lindorm", "Lindorm"),
    (r"\bdts\b|data transmission service|数据传输", "DTS"),
    (r"event ?bridge", "EventBridge"),
    (r"cloud ?monitor|云监控|\balarms?\b|告警", "CloudMonitor alarm"),
    (r"private ?zone|内网dns", "PrivateZone"),
    (r"\bsnapshots?(?:\s+polic(?:y|ies))?\b|快照", "automatic snapshot policy"),
    (r"static website hosting|website hosting|静态网站托管", "OSS static website hosting"),
    (r"cross-region replication|跨区域复制", "OSS cross-region replication"),
    (r"action ?trail|操作审计", "ActionTrail"),
    (r"container registry|\bacr\b|镜像仓库", "Container Registry"),
    (r"\bflink\b|\bspark\b|e-?mapreduce|\bemr\b|\bhbase\b|data ?works", "big data service"),
    (r"global accelerat(?:or|ion)|全球加速", "Global Accelerator"),
    (r"express connect|高速通道|smart access gateway", "Express Connect"),
    (r"kms secrets?|凭据|secrets? manager", "KMS secret"),
    (r"read[- ]only (?:rds |db |database )?instances?|read replicas?|只读实例", "RDS read-only instance"),
    (r"\bdnat\b|port forwarding|端口转发", "DNAT entry (port forwarding)"),
]
# After an unmapped product, its own generic nouns ("a Tablestore instance", "three data nodes") create nothing.
_PRODUCT_TAIL = (r"(?:\s*(?:for\s+\w+\s*)?(?:[\w.-]+\s+){0,2}?(?:instances?|clusters?|nodes?|applications?|apps?|services?"
                 r"|groups?|projects?|tasks?|jobs?|rules?|zones?|topics?|实例|集群|节点|应用|服务|任务))?")
_GENERIC_NOUNS = re.compile(r"(?<!ecs )\b(?:(?:data|worker|compute)\s+)?(?:instances?|nodes?|servers?|clusters?)\b|实例|节点",
                            re.IGNORECASE)

# What names another database engine, so that "PolarDB MySQL" or "a MongoDB database" is not also an RDS instance.
OTHER_DATABASES = re.compile(r"polar ?db(?:\s*(?:for\s+)?(?:mysql|postgres(?:ql)?|pg))?(?:\s*\d+(?:\.\d+)?)?"
                             r"(?:\s*(?:database|db|cluster|数据库|集群))?|(?:mongo ?db|\bmongo\b)(?:\s*\d+(?:\.\d+)?)?"
                             r"(?:\s*(?:database|db|数据库))?", re.IGNORECASE)
DB_INSTANCE_PHRASE = re.compile(
    r"(?:rds|redis|kvstore|mysql|postgres(?:ql)?|pg|sql ?server|database|db|cache|缓存|mongo ?db|\bmongo|polar ?db|数据库"
    r"|mariadb)\s*(?:(?!(?:and|or|with|plus|ecs|an?)\b)[\w.]+\s+){0,4}?[\u4e00-\u9fff]{0,4}?(?:instances?|实例)",
    re.IGNORECASE)

_DETERMINER = r"(?:the|our|my|your|their|its|these|those|this|existing|current)"
_ANY_NOUN = "|".join(f"(?:{pattern})" for pattern in BLOCK_PATTERNS.values())
# A product named with its port ("MySQL 3306", "Redis port 6379") is where traffic goes, not a resource to create.
_PORT_PRODUCTS = re.compile(r"(?:mysql|postgres(?:ql)?|pg|redis|mongo ?db|sql ?server|mssql|mariadb|rds)"
                            r"(?=\s*(?:port\s*)?(?:3306|5432|6379|27017|1433|3307|\d{4,5})\b(?!\s*(?:gb|g\b|mb|台|个)))"
                            r"|(?:mysql|postgres(?:ql)?|redis|mongo ?db)(?=\s+ports?\b)", re.IGNORECASE)
# (pattern, bare): a bare pattern matches a mention without a determiner; it does not apply to a counted one
# ("for two ECS instances", "so two private ECS instances can reach the internet" create them).
_REFERENCE_PATTERNS: list[tuple[str, bool]] = [
    # "for the web servers", "from the SLB's vSwitch", "of our SLB", "pointing at the ALB", "in my existing VPC"
    (rf"\b{_DETERMINER}\s+(?:existing\s+|current\s+|same\s+)?(?:[\w.'’-]+\s+){{0,2}}?(?:{_ANY_NOUN})", False),
    # "for ECS instances", "for Function Compute", "to Log Service", "from ECS instances", "access to OSS"
    (rf"(?<!terraform )(?<!template )(?<!hcl )(?<!code )(?<!json )(?<!yaml )(?<!config )(?<!ros )(?<!switch )(?<!change )"
     rf"(?<!move )(?<!it )(?<!them )(?<!upgrade )(?<!migrate )"
     rf"\b(?:for|by|from|to|via|through|onto|into)\s+(?!an?\b|{QUANTITY}\b|one\b|single\b|each\b|new\b)"
     rf"(?:(?:private|public|internal|backend|web|app|application|windows|linux)\s+)?(?:{_ANY_NOUN})", True),
    # "that ECS instances can assume", "a role ECS can assume", "servers in the private vSwitches can reach"
    (rf"(?:{_ANY_NOUN})(?=\s+(?:(?:in|of)\s+[\w\s]{{0,30}}?\s+)?(?:can|could|will|may|might|should)\s+(?:assume|use|read"
     rf"|write|access|mount|reach|call|invoke|decrypt|pull|push|talk|connect))", True),
    (rf"(?:{_ANY_NOUN})(?=\s+(?:use|uses|mount|mounts|assume|assumes)\s+(?!an?\b|\w+\s+(?:image|os)\b))", True),
    # "assumable by ECS", "readable by the FC service role", "linking two VPCs", "bound to a NAT gateway later"
    (rf"\b(?:assumable|assumed|trusted|used|usable|readable|writable|accessible|reachable|mounted|invoked|protecting"
     rf"|protects?|monitoring|linking|connecting|bound\s+to|attached\s+to(?=.*\blater\b))"
     rf"\s+(?:only\s+)?(?:by\s+|from\s+|to\s+)?(?:{_DETERMINER}\s+|an?\s+)?(?:{NUMBER}\s+)?(?:[\w-]+\s+){{0,2}}?"
     rf"(?:{_ANY_NOUN})", False),
    # "the CPU of two ECS instances", "logs of our SLB"
    (rf"\b(?:cpu|memory usage|logs?|metrics|traffic)\s+(?:of|from)\s+(?:{_DETERMINER}\s+)?(?:{NUMBER}\s+)?"
     rf"(?:[\w-]+\s+){{0,2}}?(?:{_ANY_NOUN})", False),
    # Chinese: "给ECS实例用的", "供函数计算使用", "给私网 ECS 出网用", "ECS 实例所在网段", "来自 SLB 网段", "保护两台 ECS",
    # "允许读取OSS", "可以读取 OSS 存储桶"
    (rf"(?:给|供|让)\s*(?:[\w\s]{{0,8}}?)(?:{_ANY_NOUN})(?=\s*(?:实例)?\s*(?:[\w\s]{{0,6}}?)(?:用|使用|访问|调用|读|写))",
     False),
    (rf"(?:{_ANY_NOUN})(?=\s*(?:实例)?\s*(?:所在|使用的|用的|访问的))", True),
    (rf"(?:来自|来源|保护|读取|写入|访问|连接|监控)\s*(?:{NUMBER}\s*{MEASURE}?\s*)?(?:{_ANY_NOUN})", False),
]
_REFERENCES = [(re.compile(pattern, re.IGNORECASE), bare) for pattern, bare in _REFERENCE_PATTERNS]
_COUNTED = re.compile(rf"(?:^|[^A-Za-z0-9_.])(?:{NUMBER})\s*{MEASURE}?\s*(?:[x×*]\s*)?(?:[A-Za-z][\w.-]*\s+){{0,2}}$",
                      re.IGNORECASE)
# Instance classes name their product's class, not a resource: "polar.mysql.x4.large" is no MySQL instance.
_CLASSES = re.compile(r"(?<![\w.])(?:polar|dds|redis|slb|kvstore)\.[\w-]+(?:\.[\w-]+)*", re.IGNORECASE)
# Identifiers people name things with ("ecs-logs-writer", "dev-vpc", "session-cache") name no resource kind.
_IDENTIFIER = re.compile(r"(?<![\w.:-])(?!alicloud_)[a-z0-9]+(?:[-_][a-z0-9]+)+(?![\w.:-])", re.IGNORECASE)
# RAM actions and trusted services ("oss:GetObject", "fc.aliyuncs.com") and host names name no resource.
_ACTION = re.compile(r"\b[a-z]{2,12}:[A-Za-z*]+\b")
HOST = re.compile(r"(?<![\w.-])(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?\.)+(?:com|cn|net|org|io|info|biz|dev|app|cloud"
                  r"|internal|local|co|uk|jp|hk|sg|de|us|tech|site|online|xyz|me)\b(?![\w-])", re.IGNORECASE)
_ROLE = re.compile(BLOCK_PATTERNS["ram"], re.IGNORECASE)
# Where a role's clause ends: a new list item ("..., and a KMS key", "+", "、").
CLAUSE_END = re.compile(rf"[;；。\n+、]|[,，](?=\s*(?:and\s+)?(?:an?\s+|{QUANTITY}\s+|{QUANTITY}\s*{MEASURE}|\w+\s*[:：]))"
                        rf"|\band\s+(?=an?\b|{QUANTITY}\b)", re.IGNORECASE)


def blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces (positions are kept)."""
    return text[:start] + " " * (end - start) + text[end:]


def blank_all(text: str, pattern: re.Pattern[str]) -> str:
    for match in reversed(list(pattern.finditer(text))):
        text = blank(text, match.start(), match.end())
    return text


def unmapped_products(text: str) -> tuple[list[str], str]:
    """Names of unsupported products asked for, and the text with them (and their generic nouns) blanked out."""
    found: list[str] = []
    for pattern, name in UNMAPPED_PATTERNS:
        regex = re.compile(rf"(?:{pattern}){_PRODUCT_TAIL}", re.IGNORECASE)
        matches = list(regex.finditer(text))
        if not matches:
            continue
        if name not in found:
            found.append(name)
        for match in reversed(matches):
            clause_end = re.search(r"[,;，；。\n]|\band\b", text[match.end():])
            stop = match.end() + (clause_end.start() if clause_end else len(text) - match.end())
            tail = blank_all(text[match.end():stop], _GENERIC_NOUNS)  # "with 2 instances", "with three data nodes"
            text = text[:match.start()] + " " * (match.end() - match.start()) + tail + text[stop:]
    return found, text


def _role_clauses(text: str) -> str:
    """In a role's clause, what follows the role is whom it trusts or what it may access: blank those mentions."""
    for role in reversed(list(_ROLE.finditer(text))):
        end = CLAUSE_END.search(text, role.end())
        stop = end.start() if end else len(text)
        clause = text[role.end():stop]
        others = "|".join(f"(?:{BLOCK_PATTERNS[block]})" for block in BLOCKS if block != "ram")
        clause = blank_all(clause, re.compile(others, re.IGNORECASE))
        text = text[:role.end()] + clause + text[stop:]
    return text


_NEXT_NOUN = re.compile(rf"\s*(?:实例|{_ANY_NOUN})", re.IGNORECASE)


def _phrase_end(text: str, end: int) -> int:
    """Where the noun phrase ending at ``end`` really ends: "ECS" is followed by "instances", "OSS" by "bucket"."""
    while True:
        following = _NEXT_NOUN.match(text, end)
        if following is None or following.end() == end:
            return end
        end = following.end()


def references(text: str) -> str:
    """The text with every mention that only names a principal, a target or a source blanked out."""
    text = blank_all(text, HOST)
    text = blank_all(text, _ACTION)
    text = blank_all(text, _IDENTIFIER)
    text = blank_all(text, _CLASSES)
    text = blank_all(text, _PORT_PRODUCTS)
    for pattern, bare in _REFERENCES:
        for match in reversed(list(pattern.finditer(text))):
            if bare and _COUNTED.search(text[max(0, match.start() - 40):match.start()]):
                continue
            text = blank(text, match.start(), _phrase_end(text, match.end()))
    if _ROLE.search(text):
        text = _role_clauses(text)
    return text


def mention_text(block: str, text: str) -> str:
    """``text`` prepared for finding ``block``: what looks like it but names something else is blanked out."""
    if block == "ecs":
        text = blank_all(text, DB_INSTANCE_PHRASE)
        text = _cluster_nodes(text)
        text = blank_all(text, re.compile(r"\binstance (?:ram )?roles?\b|实例角色|\bread[- ]only\s+instances?", re.IGNORECASE))
    if block == "rds":
        text = blank_all(text, OTHER_DATABASES)
    if block == "slb":
        text = blank_all(text, re.compile(r"(?:application|network) load balancers?|应用型负载均衡|网络型负载均衡",
                                          re.IGNORECASE))
    if block == "ram":
        text = blank_all(text, re.compile(r"\brole[- ]?based\b", re.IGNORECASE))
    return text


# A list item that starts with a resource ("..., ecs.g7.large x 2") ends the clause before it.
# A bare instance type there is the cluster's node type ("ACK cluster, 3 nodes, ecs.g7.xlarge").
_NEXT_ITEM = re.compile(rf"(?:[;；。\n+、]|[,，])\s*(?:{QUANTITY}\s*{MEASURE}?\s*(?:[\w-]+\s+){{0,2}}?)?"
                        rf"(?=(?!ecs\.)(?:{_ANY_NOUN})|ecs\.[\w.-]+\s*(?:[x*]\s*\d|instances?|servers?|vms?|台|实例))",
                        re.IGNORECASE)
_NODE_TYPE = re.compile(r"\becs\.[\w.-]+(?=\s*(?:worker\s+)?(?:nodes?\b|节点))|(?<=nodes of )ecs\.[\w.-]+"
                        r"|(?<=节点规格)\s*ecs\.[\w.-]+|\b(?:worker\s+)?nodes?\b|节点|node ?pools?|节点池", re.IGNORECASE)


def _cluster_nodes(text: str) -> str:
    """A Kubernetes cluster's nodes and node types (in its clause, or written with "nodes") are its node pool's."""
    ack = re.compile(BLOCK_PATTERNS["ack"], re.IGNORECASE)
    if not ack.search(text):
        return text
    for match in reversed(list(ack.finditer(text))):
        end = _NEXT_ITEM.search(text, match.end())
        stop = end.start() if end else len(text)
        clause = blank_all(text[match.end():stop], re.compile(r"\becs\.[\w.-]+", re.IGNORECASE))
        text = text[:match.end()] + clause + text[stop:]
    return blank_all(text, _NODE_TYPE)


def spans(block: str, text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each mention of ``block`` in ``text``."""
    for match in re.finditer(BLOCK_PATTERNS[block], mention_text(block, text), re.IGNORECASE):
        yield match.start(), match.end()


def mentions(block: str, text: str) -> bool:
    """Whether the text mentions a building block (database/cache "instances" are not ECS instances)."""
    return next(spans(block, text), None) is not None


def all_spans(text: str) -> list[tuple[int, int, str]]:
    """Every mention in ``text``: (start, end, block), in order; a longer mention wins over one inside it."""
    found = sorted(((start, end, block) for block in BLOCKS for start, end in spans(block, text)),
                   key=lambda item: (item[0], -item[1]))
    result: list[tuple[int, int, str]] = []
    for start, end, block in found:
        if result and start < result[-1][1]:
            continue
        if result and result[-1][2] == block and not text[result[-1][1]:start].strip():
            result[-1] = (result[-1][0], end, block)  # "ECS instances", "OSS bucket": one noun phrase
            continue
        result.append((start, end, block))
    return result
