"""Reading a request: the rules that turn English, Chinese or mixed text into a generation *delta*.

``parse_request`` returns everything a request says: the blocks it creates or removes, their counts, the
settings it states (each read next to the noun it qualifies: a size or a name belongs to the resource it is
written with), the security group rules and listener ports, format, region, tags, and what cannot be mapped
or used. ``generation.apply_delta`` applies it to the previous spec. A request's mentions of resources as a
principal, target or source create nothing (``mentions.references``).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from iac_code_runtime_offline.engine import mentions as m
from iac_code_runtime_offline.engine.quantities import MEASURE, NUMBER, QUANTITY, is_count, number, terraform_count

ANYWHERE = "0.0.0.0/0"
DEFAULT_IMAGE = "aliyun_3_x64_20G_alibase_20240819.vhd"
RDS_DEFAULTS = {
    "MySQL": ("8.0", "mysql.n2.medium.1"),
    "PostgreSQL": ("14.0", "pg.n2.medium.1"),
    "SQLServer": ("2019_std_ha", "mssql.x4.medium.s2"),
    "MariaDB": ("10.3", "mariadb.n2.medium.2c"),
}
# Blocks in the order the delta lists them.
BLOCK_ORDER = ("vpc", "vswitch", "security_group", "ecs", "alb", "nlb", "slb", "nat", "eip", "rds", "redis", "oss", "kms",
               "sls", "mongodb", "polardb", "dns", "nas", "ram", "fc", "ack", "ess")
# Blocks that may be named ("a VPC named prod-vpc", "名为 prod-sg 的安全组").
NAMEABLE = ("vpc", "security_group", "ecs", "slb", "alb", "nlb", "redis", "oss", "ack", "ess", "mongodb", "polardb", "rds",
            "nas")

_CIDR = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3}/\d{1,2})(?![\d.])")
_REGION_PREFIXES = "cn|ap|us|eu|me|sa|na"
_ZONE = re.compile(rf"(?<![\w.-])((?:{_REGION_PREFIXES})-[a-z]+(?:-\d+[a-z]|(?:-\d+)?-[a-z]))(?![\w.-])", re.IGNORECASE)
_REGION = re.compile(rf"(?<![\w.-])((?:{_REGION_PREFIXES})-[a-z]+(?:-\d+)?)(?![\w.-])", re.IGNORECASE)
REGION_NAMES = {
    "杭州": "cn-hangzhou", "上海": "cn-shanghai", "北京": "cn-beijing", "深圳": "cn-shenzhen", "张家口": "cn-zhangjiakou",
    "青岛": "cn-qingdao", "成都": "cn-chengdu", "香港": "cn-hongkong", "新加坡": "ap-southeast-1", "东京": "ap-northeast-1",
    "法兰克福": "eu-central-1", "硅谷": "us-west-1", "hangzhou": "cn-hangzhou", "shanghai": "cn-shanghai",
    "beijing": "cn-beijing", "shenzhen": "cn-shenzhen", "hong kong": "cn-hongkong", "qingdao": "cn-qingdao",
    "chengdu": "cn-chengdu", "zhangjiakou": "cn-zhangjiakou", "singapore": "ap-southeast-1", "frankfurt": "eu-central-1",
    "silicon valley": "us-west-1", "virginia": "us-east-1", "tokyo": "ap-northeast-1", "london": "eu-west-1",
    "jakarta": "ap-southeast-5", "sydney": "ap-southeast-2", "kuala lumpur": "ap-southeast-3", "dubai": "me-east-1",
    "seoul": "ap-northeast-2",
}
_FULL_WIDTH = str.maketrans({"，": ", ", "：": ": ", "；": "; ", "（": " (", "）": ") ", "、": ", ", "。": ". ", "！": "! ",
                             "？": "? ", "＋": " + ", "～": "~", "“": '"', "”": '"', "‘": "'", "’": "'", "　": " ",
                             "＝": "=", "×": "x"})
_REMOVE = (r"(?:\b(?:remove|delete|drop|without|get rid of|no(?:\s+more|\s+longer\s+(?:need|want))?|(?:don't|do not) need)\b"
           r"|删除|去掉|移除|不要|不需要)\s*(?:the\s+|a\s+|an\s+|all\s+)?")
_ADD_WORDS = re.compile(r"\b(?:add|another|more|extra|additional|plus|also)\b|增加|再加|添加|新增|再", re.IGNORECASE)
_SIZE_UNIT = r"(?:gi?b|g|tb|t)(?![a-z])"
_SENTENCE = re.compile(r"[;\n]|\.(?=\s|$)")


def _has(text: str, pattern: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _first(pattern: str, text: str) -> str | None:
    """The first group of the first match of ``pattern`` (case-insensitive), or None."""
    match = re.search(pattern, text, re.IGNORECASE)
    return match.group(1) if match else None


def normalize(prompt: str) -> str:
    """Full-width punctuation to ASCII and spaces at CJK/ASCII boundaries ("两台ECS" -> "两台 ECS"), so ``\\b`` works."""
    text = prompt.translate(_FULL_WIDTH)
    return re.sub(r"(?<=[\u4e00-\u9fff])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[\u4e00-\u9fff])", " ", text)


def region_of(text: str) -> str | None:
    """An Alibaba Cloud region id (or a well-known city name) mentioned in the text."""
    text = m.blank_all(text, m.HOST)
    match = _REGION.search(text)
    if match:
        return match.group(1).lower()
    zone = _ZONE.search(text)
    if zone:
        name = zone.group(1).lower()
        return name.rsplit("-", 1)[0] if re.search(r"-[a-z]$", name) else name[:-1]  # cn-hangzhou-h, ap-southeast-1a
    lowered = text.lower()
    for name, region in REGION_NAMES.items():
        if name in lowered:
            return region
    return None


def _size_gb(value: str, unit: str) -> int:
    return int(value) * (1024 if unit.lower().startswith("t") else 1)


# ---------------------------------------------------------------- what the request mentions, and where


class Reading:
    """One request being read: the text, the text in which only creating mentions remain, and those mentions."""

    def __init__(self, prompt: str, previous: dict[str, Any] | None) -> None:
        self.text = normalize(prompt)
        self.previous = previous
        self.unmapped, without_products = m.unmapped_products(self.text)
        self.creating = m.references(without_products)  # same length as ``text``
        self.spans = m.all_spans(self.creating)

    def mentioned(self, block: str) -> bool:
        return any(found == block for _, _, found in self.spans)

    def sentence_bounds(self, position: int) -> tuple[int, int]:
        starts = [match.end() for match in _SENTENCE.finditer(self.text, 0, position)]
        following = _SENTENCE.search(self.text, position)
        return (starts[-1] if starts else 0), (following.start() if following else len(self.text))

    def owner(self, start: int, end: int, candidates: tuple[str, ...] | None = None) -> str | None:
        """The block a value written at ``[start, end)`` qualifies, if it is one of ``candidates``.

        A noun right after it ("10 Mbps EIP", "X 的 Y") wins; else the nearest mention before it in its sentence;
        else the nearest after it; else the nearest anywhere; else, in an edit, the one block of the previous
        spec that takes such a value.
        """
        found = self._owner(start, end)
        if found is not None:
            return found if candidates is None or found in candidates else None
        if self.previous and candidates:
            present = [block for block in candidates if self.previous.get(_SPEC_KEY.get(block, block))]
            if len(present) == 1:
                return present[0]
        return None

    def _owner(self, start: int, end: int) -> str | None:
        if not self.spans:
            return None
        inside = [span for span in self.spans if span[0] <= start and end <= span[1]]
        if inside:  # the value is itself the mention ("ecs.c7.large x 2")
            return inside[0][2]
        low, high = self.sentence_bounds(start)
        after = [span for span in self.spans if end <= span[0] < high]
        if after:
            gap = self.text[end:after[0][0]]
            if re.fullmatch(r"\s*(?:的\s*)?(?:[\w.-]+\s+){0,2}?", gap) and not re.search(
                    r"[,;]|\b(?:and|with|in|for|behind|plus|on)\b|和|及", gap):
                return after[0][2]
        before = [span for span in self.spans if low <= span[0] and span[1] <= start]
        if before:
            return before[-1][2]
        if after:
            return after[0][2]
        return min(self.spans, key=lambda span: min(abs(span[0] - end), abs(span[1] - start)))[2]


_SPEC_KEY = {"slb": "load_balancer", "alb": "load_balancer", "nlb": "load_balancer"}


# ---------------------------------------------------------------- counts


_ECS_COUNT_NOUNS = (r"(?:ecs\s+)?(?:instances?|servers?|vms?|virtual machines?|hosts?|machines?)(?![\w-])|\becs\b"
                    r"|ecs\.[a-z0-9-]+\.[a-z0-9]+|云服务器|服务器|ecs\s*实例|实例|主机|虚拟机|机器|alicloud_instance")
_MODIFIER = r"(?:(?!(?:and|or|with|in|of|for|behind|second|third|fourth|fifth|other|different)\b)[a-z][\w.+-]*\s+)"
_SUB_PARTS = (r"(?:listeners?|rules?|entries|records?|accounts?|disks?|nodes?|triggers?|polic(?:y|ies)|keys?|shards?|ports?"
              r"|types?)")


def count_of(text: str, nouns: str) -> tuple[int, list[tuple[int, int]]] | None:
    """The count a request gives some nouns (summed over the phrases that count them), and where those phrases are."""
    pre = re.compile(rf"(?<![A-Za-z0-9_.])({QUANTITY})\s*{MEASURE}?\s*(?:[x*]\s*)?(?:(?:more|extra|additional|new)\s+)?"
                     rf"{_MODIFIER}{{0,3}}(?:{nouns})(?!\s*{_SUB_PARTS}\b)", re.IGNORECASE)
    post = re.compile(rf"(?:{nouns})\s*(?:[x*]\s*({NUMBER})(?![\w.])|[:=]\s*({NUMBER})(?![\w./:-])(?!\s*(?:gb|g\b|mb|vcpu|核))"
                      rf"|\s*({NUMBER})\s*{MEASURE}|\s*,?\s*({NUMBER})\s+of\s+them)", re.IGNORECASE)
    found: list[tuple[int, int, int, bool]] = []
    for match in pre.finditer(text):
        if not is_count(text, match.start(1), match.end(1)):
            continue
        value = number(match.group(1))
        if value is not None:
            article = bool(re.fullmatch(r"an?", match.group(1).strip(), re.IGNORECASE))
            found.append((match.start(), match.end(), value, article))
    for match in post.finditer(text):
        group = next(index for index in range(1, 5) if match.group(index))
        if any(start <= match.start() < end or start <= match.start(group) < end for start, end, _, _ in found):
            continue
        if not is_count(text, match.start(group), match.end(group)):
            continue
        value = number(match.group(group))
        if value is not None:
            found.append((match.start(), match.end(), value, False))
    if not found:
        return None
    found.sort()
    # "a"/"an" only count when nothing else does ("an ECS instance" -> 1, but not on top of "two ECS instances").
    chosen = [item for item in found if not item[3]] or found[:1]
    return sum(item[2] for item in chosen), [(item[0], item[1]) for item in chosen]


def _ecs_count(reading: Reading) -> int | None:
    text = m.mention_text("ecs", reading.creating)
    counted = count_of(text, _ECS_COUNT_NOUNS)
    total = counted[0] if counted else None
    # A bare "两台"/"一台" (machines) that is not another counted phrase ("一台做跳板机").
    used = counted[1] if counted else []
    nouns = "|".join(m.BLOCK_PATTERNS.values())
    for match in re.finditer(rf"(?<![A-Za-z0-9_.])({NUMBER})\s*台(?!\s*(?:{_ECS_COUNT_NOUNS}|{nouns}))", text, re.IGNORECASE):
        if any(start <= match.start() < end for start, end in used) or not is_count(text, match.start(1), match.end(1)):
            continue
        value = number(match.group(1))
        if value:
            total = (total or 0) + value
    zones = _zones(reading.text)
    per_zone = _has(text, r"\b(?:one|1|an?)\s+(?:[\w.-]+\s+){0,3}?(?:per|in each|each)\s+(?:zone|az|availability zone)\b"
                          r"|each zone|every zone|各一台|每个可用区(?:各)?一台|\bone in each\b")
    if per_zone:
        count = len(zones) or _zone_count(reading.text) or 2
        if _has(text, r"\bone in each\b") and total:
            return total
        total = count
    tf_count = terraform_count(reading.text)
    if tf_count is not None and (total is None or total == 1):
        total = tf_count
    return total


def _zone_count(text: str) -> int | None:
    match = re.search(rf"({NUMBER})\s*(?:个)?\s*(?:availability\s+)?(?:zones|可用区|azs?)\b", text, re.IGNORECASE)
    return number(match.group(1)) if match else None


# ---------------------------------------------------------------- network


def _zones(text: str) -> list[str]:
    return list(dict.fromkeys(zone.lower() for zone in _ZONE.findall(m.blank_all(text, m.HOST))))


_SOURCE_WORDS = (r"(?:\bfrom\b|\bsources?\b|\bonly\b|\ballow(?:s|ed|ing)?\b|\bopen(?:s|ed|ing)?\b|\bexpose[sd]?\b|\bpermit"
                 r"|white ?list(?:ed)?|\breachable\b|\baccessible\b|\b(?:restrict|limit)(?:ed)?\b"
                 r"|允许|来自|来源|仅限?|只允许|限|访问|白名单|放行|开放)")
_VSWITCH_WORDS = r"(?:v-?switch(?:es)?|交换机|subnets?|子网)\s*(?:cidrs?|网段)?\s*(?:block)?\s*(?:is|of|=|:|为|是)?\s*$"
_VPC_WORDS = (r"(?:vpcs?|专有网络|私有网络|network|cidr(?:\s*block)?|网段|地址段)\s*(?:cidr)?\s*(?:block)?\s*(?:is|of|=|:|为|是)?"
              r"\s*$")


def cidrs(text: str) -> dict[str, list[tuple[str, int]]]:
    """CIDRs by role: "vpc", "vswitch" and "source" (with their positions), read from what is written around each."""
    roles: dict[str, list[tuple[str, int]]] = {"vpc": [], "vswitch": [], "source": []}
    last_role: str | None = None
    last_end = 0
    for match in _CIDR.finditer(text):
        cidr = match.group(1)
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue
        window_start = max(last_end, match.start() - 60)
        clause = re.split(r"[,;\n]|\.\s", text[window_start:match.start()])[-1].lower()
        immediate = text[max(0, match.start() - 30):match.start()].lower()
        following = text[match.end():match.end() + 12].lower()
        if last_role and re.fullmatch(r"\s*(?:,|and|or|和|及|与|/)\s*", text[last_end:match.start()]):
            role = last_role  # a list continues: "vSwitches 10.1.1.0/24 and 10.1.2.0/24", "from 10.0.0.0/8, 172.16.0.0/12"
        elif re.search(_SOURCE_WORDS, clause, re.IGNORECASE):
            role = "source"
        elif re.search(_VSWITCH_WORDS, immediate):
            role = "vswitch"
        elif re.search(r"(?:网段|cidr(?:\s*block)?|地址段)\s*(?:is|of|=|:|为|是)?\s*$", immediate) and _nearer_vswitch(
                text, match.start()):
            role = "vswitch"
        elif re.search(_VPC_WORDS, immediate) or re.match(r"\s*(?:的\s*)?(?:vpc|专有网络)", following):
            role = "vpc" if not roles["vpc"] else "vswitch"
        elif network.prefixlen >= 32 or not network.is_private:
            role = "source"
        elif not roles["vpc"]:
            role = "vpc"
        else:
            role = "vswitch"
        roles[role].append((str(network) if role == "vpc" else cidr, match.start()))
        last_role, last_end = role, match.end()
    return roles


def _nearer_vswitch(text: str, position: int) -> bool:
    """Whether a generic "网段"/"CIDR" at ``position`` follows a vSwitch noun more closely than a VPC noun."""
    before = text[max(0, position - 40):position].lower()
    vswitch = max((match.end() for match in re.finditer(r"v-?switch(?:es)?|交换机|subnets?|子网", before)), default=-1)
    vpc = max((match.end() for match in re.finditer(r"\bvpcs?\b|专有网络|私有网络", before)), default=-1)
    return vswitch > vpc


def _parse_network(reading: Reading, delta: dict[str, Any]) -> None:
    """VPC CIDR, vSwitch count/CIDRs/zones and region into ``delta``."""
    text = reading.text
    roles = cidrs(text)
    if roles["vpc"]:
        delta["vpc_cidr"] = roles["vpc"][0][0]
    if roles["vswitch"]:
        delta["vswitch_cidrs"] = [cidr for cidr, _ in roles["vswitch"]]
    zones = _zones(text)
    if zones:
        delta["zones"] = zones
    region = region_of(text)
    if region:
        delta["region"] = region
    counted = count_of(reading.creating, r"v-?switch(?:es)?|交换机|subnets?|子网|alicloud_vswitch")
    count = counted[0] if counted else None
    ordinal = re.search(r"\b(?:a\s+)?(second|third|fourth|fifth)\s+(?:v-?switch|subnet)|第([二三四五])个\s*交换机",
                        reading.creating, re.IGNORECASE)
    if count is None and ordinal and reading.previous:
        delta["vswitch_count"] = (1, True)
        return
    multi_zone = (r"(?:two|2|multiple|多个|两个|双)\s*(?:availability\s+)?(?:zones|可用区)|multi-?(?:zone|az)"
                  r"|high availability|highly available|高可用")
    if count is None and _has(text, multi_zone):
        count = _zone_count(text) or 2
    if count is not None:
        relative = reading.previous is not None and bool(_ADD_WORDS.search(text)) and reading.mentioned("vswitch")
        removing = _has(text, rf"{_REMOVE}(?:\w+\s+)?(?:v-?switch|交换机|subnet)")
        delta["vswitch_count"] = (-count if removing else count, relative or removing)


# ---------------------------------------------------------------- security group rules and listener ports

_NAMED_PORTS = [(r"\bssh\b", "22/22"), (r"\brdp\b|remote desktop|远程桌面", "3389/3389"),
                (r"\bhttps\b(?!\s*(?:listeners?|triggers?|endpoints?|监听|触发器|api))", "443/443"),
                (r"\bhttp\b(?!\s*(?:listeners?|triggers?|endpoints?|api|监听|触发器))", "80/80"),
                (r"\bping\b|\bicmp\b", "-1/-1")]
_PORT_ITEM = (r"\d{1,5}(?:\s*(?:-|~|to)\s*\d{1,5})?(?![\d.])(?!\s*(?:gb|g\b|mb|m\b|个|台|块|x\b|vcpus?|cores?|ecs|eips?"
              r"|instances?|servers?|vms?|nodes?|v-?switch\w*|交换机|days?|天|mbps))")
# A port further down a list ends where a list item ends ("80, 443 from ...", not "80, 1 CentOS instance").
_LIST_END = (r"(?=\s*(?:$|[,;.)/&]|\b(?:and|or|from|to|only|open|on|for|tcp|udp|listeners?|ports?)\b|和|及|与|端口|的|开放|访问"
             r"|对外|仅|只|来源))")
_PORT_LIST = rf"({_PORT_ITEM}(?:\s*(?:,|/|and|&|和|及|与|or)\s*(?:ports?\s*)?{_PORT_ITEM}{_LIST_END})*)"
_ALLOW = r"(?:open(?:s|ed|ing)?|allow(?:s|ed|ing)?|expose[sd]?|exposing|permit(?:s|ted)?|开放|放行|放通|允许|打开|开)"
_EXPLICIT_PORTS = [
    # a list of ports with its source, continuing a rule list: "..., 80/443 from 0.0.0.0/0", "with 22 from ..."
    re.compile(rf"(?:[,:;]|\bwith\b|\band\b)\s*(?:ports?\s*)?{_PORT_LIST}\s+(?:only\s+)?(?:from|to)\b", re.IGNORECASE),
    re.compile(rf"{_ALLOW}\s*(?:the\s+)?(?:inbound\s+)?(?:(?:tcp|udp)\s+)?(?:ports?\s*|端口\s*)?(?:for\s+)?{_PORT_LIST}",
               re.IGNORECASE),
    re.compile(rf"{_PORT_LIST}\s*(?:端口)?\s*(?:to\s+\S+\s+)?{_ALLOW}", re.IGNORECASE),
]
_PORT_CONTEXTS = [
    re.compile(rf"(?:ports?|端口)\s*(?:number\s*)?:?\s*{_PORT_LIST}", re.IGNORECASE),
    re.compile(rf"{_PORT_LIST}\s*(?:端口|ports?\b)", re.IGNORECASE),
    re.compile(rf"\b(?:tcp|udp)\s*(?:ports?\s*)?{_PORT_LIST}", re.IGNORECASE),
    re.compile(r"(?:mysql|postgres(?:ql)?|redis|mongo ?db|sql ?server|mssql|mariadb)\s+(?:port\s+)?"
               r"(3306|3307|5432|6379|27017|1433|\d{4,5}(?=\s+(?:from|to|only|open)))\b", re.IGNORECASE),
]
_LISTENER_CONTEXTS = [
    re.compile(rf"(?:listeners?|listening|监听)\s*,?\s*(?:on\s+)?(?:(?:tcp|udp|http|https)\s+)?(?:ports?\s*)?(?:on\s+)?"
               rf"{_PORT_LIST}", re.IGNORECASE),
    re.compile(rf"{_PORT_LIST}\s*(?:端口)?\s*(?:的)?\s*(?:(?:tcp|udp|http)\s+)?(?:listeners?|监听)", re.IGNORECASE),
]
_ANYWHERE_WORDS = (r"anywhere|any ip|the internet|the world|everyone|everybody|publicly|0\.0\.0\.0/0|任意|任何|所有\s*ip|互联网"
                   r"|对外|公网访问")
_ADMIN_PORTS = {"22/22", "3389/3389", "-1/-1"}


def _port_ranges(text: str) -> list[str]:
    ranges = []
    for low, high in re.findall(r"(\d{1,5})(?:\s*(?:-|~|to)\s*(\d{1,5}))?", text):
        first, last = int(low), int(high or low)
        if 0 < first <= last <= 65535:
            ranges.append(f"{first}/{last}")
    return ranges


def _find_ports(text: str, patterns: list[re.Pattern[str]]) -> list[tuple[int, str, str]]:
    """(position, port range, protocol) of the ports written in the given contexts."""
    found: list[tuple[int, str, str]] = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            start = match.start(1)
            near = text[max(0, match.start() - 12):match.end()].lower()
            protocol = "udp" if re.search(r"\budp\b", near) else "tcp"
            for item in re.finditer(r"\d{1,5}(?:\s*(?:-|~|to)\s*\d{1,5})?", match.group(1)):
                for port_range in _port_ranges(item.group(0)):
                    found.append((start + item.start(), port_range, protocol))
    return found


def _ports(reading: Reading) -> tuple[list[tuple[int, str, str]], list[tuple[int, str, str]], bool]:
    """(rule ports, listener ports, whether opening ports was asked for explicitly)."""
    text = reading.text
    if reading.mentioned("fc"):  # an HTTP trigger of a function opens no port of ours
        text = m.blank_all(text, re.compile(r"(?:public\s+|anonymous\s+)?https?\s+(?:triggers?|endpoints?|api)"
                                            r"|https?\s*触发器|triggered\s+over\s+https?", re.IGNORECASE))
    listeners = _find_ports(text, _LISTENER_CONTEXTS)
    listener_positions = {position for position, _, _ in listeners}
    explicit = _find_ports(text, _EXPLICIT_PORTS)
    contextual = _find_ports(text, _PORT_CONTEXTS)
    named: list[tuple[int, str, str]] = []
    for pattern, port_range in _NAMED_PORTS:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            named.append((match.start(), port_range, "icmp" if port_range == "-1/-1" else "tcp"))
    rules: dict[tuple[int, str], tuple[int, str, str]] = {}
    for position, port_range, protocol in explicit + contextual + named:
        if position not in listener_positions:
            rules.setdefault((position, port_range), (position, port_range, protocol))
    ordered = sorted(rules.values())
    asked = bool(explicit or named) or reading.mentioned("security_group")
    return ordered, listeners, asked


def _listener_ports(reading: Reading, listeners: list[tuple[int, str, str]]) -> list[int]:
    """A load balancer's listener ports: the ones written as listeners, else the ones written as a port ("on port 8080",
    "端口 8080", "TCP 443") rather than opened ("open 443", which the security group gets); admin ports never."""
    if listeners:
        chosen = [port for _, port, _ in listeners]
    else:
        explicit = {position for position, _, _ in _find_ports(reading.text, _EXPLICIT_PORTS)}
        chosen = [port for position, port, _ in _find_ports(reading.text, _PORT_CONTEXTS)
                  if port not in _ADMIN_PORTS and position not in explicit]
    return [int(port.split("/")[0]) for port in dict.fromkeys(chosen) if port.split("/")[0] == port.split("/")[1]]


def _sources(text: str) -> list[tuple[int, str]]:
    """(position, CIDR) of every traffic source written: CIDRs in a source context, and "anywhere" words."""
    found = [(position, cidr) for cidr, position in cidrs(text)["source"]]
    for match in re.finditer(_ANYWHERE_WORDS, text, re.IGNORECASE):
        if not any(abs(match.start() - position) < 3 for position, _ in found):
            found.append((match.start(), ANYWHERE))
    return sorted(found)


def _parse_rules(reading: Reading, ports: list[tuple[int, str, str]]) -> list[dict[str, str]]:
    """Ingress rules: each group of ports takes the source written after it, else a source written on its own."""
    items = [(position, "port", (port_range, protocol)) for position, port_range, protocol in ports]
    items += [(position, "source", cidr) for position, cidr in _sources(reading.text)]
    items.sort(key=lambda item: item[0])
    group: list[tuple[int, tuple[str, str]]] = []
    assigned: list[tuple[int, tuple[str, str], str]] = []
    free: list[tuple[int, str]] = []
    for position, kind, value in items:
        if kind == "port":
            group.append((position, value))  # type: ignore[arg-type]
        elif group:
            assigned += [(port_position, port, str(value)) for port_position, port in group]
            group = []
        else:
            free.append((position, str(value)))
    for port_position, port in group:
        assigned.append((port_position, port, ""))
    rules: list[dict[str, str]] = []
    for port_position, (port_range, protocol), source in assigned:
        if not source and free:
            before = [cidr for position, cidr in free if position < port_position]
            source = before[-1] if before else free[0][1]
        rule = {"protocol": protocol, "port_range": port_range, "source": source}
        if rule not in rules:
            rules.append(rule)
    return rules


# ---------------------------------------------------------------- compute

_IMAGES = [
    (r"ubuntu\s*20(?:\.04)?", "ubuntu_20_04_x64_20G_alibase_20240819.vhd"),
    (r"ubuntu", "ubuntu_22_04_x64_20G_alibase_20240807.vhd"),
    (r"centos\s*8", "centos_8_5_x64_20G_alibase_20240819.vhd"),
    (r"centos", "centos_7_9_x64_20G_alibase_20240628.vhd"),
    (r"debian\s*11", "debian_11_11_x64_20G_alibase_20240819.vhd"),
    (r"debian", "debian_12_6_x64_20G_alibase_20240823.vhd"),
    (r"windows(?:\s+server)?\s*2016", "win2016_1607_x64_dtc_en-us_40G_alibase_20240816.vhd"),
    (r"windows(?:\s+server)?\s*2019", "win2019_1809_x64_dtc_en-us_40G_alibase_20240816.vhd"),
    (r"windows", "win2022_21H2_x64_dtc_en-us_40G_alibase_20240816.vhd"),
    (r"alibaba cloud linux|aliyun linux|alinux|阿里云\s*linux", DEFAULT_IMAGE),
]
_INSTANCE_TYPE = re.compile(r"(?<![\w.])(ecs\.[a-z0-9-]+\.[a-z0-9]+)(?![\w.])", re.IGNORECASE)
_SYSTEM_DISK = r"system\s+disks?|系统盘"
_DATA_DISK = r"data\s+disks?|(?:cloud|essd|ssd|extra|additional|second)\s+disks?|数据盘|云盘"
_DISK_CATEGORY = [(r"cloud_essd_entry", "cloud_essd_entry"), (r"cloud_essd|\bessd\b", "cloud_essd"),
                  (r"cloud_ssd|\bssd\b", "cloud_ssd"), (r"cloud_efficiency|高效云盘|ultra disk", "cloud_efficiency"),
                  (r"cloud_auto", "cloud_auto")]
_FAMILY_BY_RATIO = {1: "c7", 2: "c7", 4: "g7", 8: "r7"}
_SIZE_BY_CPU = {2: "large", 4: "xlarge", 8: "2xlarge", 16: "4xlarge", 32: "8xlarge", 64: "16xlarge"}


def _size(text: str, nouns: str) -> int | None:
    """A size in GB written next to ``nouns`` ("40 GB system disk", "system disk of 40GB", "系统盘40G", "1 TB 数据盘")."""
    category = r"(?:(?:cloud_\w+|essd|ssd)\s+)?"
    for pattern in (rf"(\d+)\s*({_SIZE_UNIT})\s*(?:of\s+)?(?:的\s*)?{category}(?:{nouns})",
                    rf"(?:{nouns})\s*(?:size\s*)?(?:of|:|=|为)?\s*(?:{NUMBER}\s*{MEASURE}\s*)?(?:各|each|每块)?\s*(\d+)\s*"
                    rf"({_SIZE_UNIT})?"):
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return _size_gb(match.group(1), match.group(2) or "g")
    return None


def _instance_type_for(cpus: int, memory: int) -> str | None:
    family = _FAMILY_BY_RATIO.get(max(1, memory // max(1, cpus)))
    size = _SIZE_BY_CPU.get(cpus)
    return f"ecs.{family}.{size}" if family and size else None


def _disk_categories(text: str) -> dict[str, str]:
    """Disk categories by disk ("system" / "data"): each category goes to the disk written nearest to it."""
    found: dict[str, str] = {}
    disks = [(match.start(), "system") for match in re.finditer(_SYSTEM_DISK, text, re.IGNORECASE)]
    disks += [(match.start(), "data") for match in re.finditer(_DATA_DISK, text, re.IGNORECASE)]
    for pattern, category in _DISK_CATEGORY:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            if not disks:
                found.setdefault("data", category)
                continue
            nearest = min(disks, key=lambda disk: abs(disk[0] - match.start()))[1]
            found.setdefault(nearest, category)
    return found


def _parse_ecs(reading: Reading, owners: dict[str, str | None]) -> dict[str, Any]:
    """ECS instance settings written in the request (only what is mentioned)."""
    text = reading.text
    ecs: dict[str, Any] = {}
    count = _ecs_count(reading)
    relative = reading.previous is not None and bool(reading.previous.get("ecs"))
    if count is not None:
        adding = relative and bool(_ADD_WORDS.search(reading.creating))
        fewer = relative and _has(text, r"\bfewer\b|\bless\b|少一|减少|\bremove\s+(?:one|\d+|two)\b")
        ecs["count"] = (-count if fewer else count, adding or fewer)
    elif relative:
        instead = re.search(rf"\b({NUMBER})\s+instead\s+of\s+(?:{NUMBER})\b|\bmake\s+(?:it|that)\s+({NUMBER})\b(?!\s*\w)",
                            text, re.IGNORECASE)
        more = re.search(rf"(?:再加|再来|增加|加)\s*({NUMBER})\s*台|\b({NUMBER})\s+more\b(?!\s+\w)", text, re.IGNORECASE)
        if instead:
            ecs["count"] = (number(instead.group(1) or instead.group(2)) or 1, False)
        elif more:
            ecs["count"] = (number(more.group(1) or more.group(2)) or 1, True)
    types = [(match.group(1).lower(), match.start()) for match in _INSTANCE_TYPE.finditer(text)]
    mine = [kind for kind, position in types if owners.get(f"type@{position}") in (None, "ecs", "ess")]
    if mine:
        ecs["instance_type"] = mine[0]
    else:
        shape = (re.search(r"(\d+)\s*(?:vcpus?|cpus?|cores?|核|c)(?![a-z])\s*(?:,|and|和|/)?\s*(\d+)\s*(?:gi?b|g)(?![a-z])",
                           text, re.IGNORECASE))
        if shape:
            kind = _instance_type_for(int(shape.group(1)), int(shape.group(2)))
            if kind:
                ecs["instance_type"] = kind
    image = re.search(r"\b(m-[a-z0-9]{8,})\b|\b([\w.-]+\.vhd)\b", text, re.IGNORECASE)
    if image:
        ecs["image"] = image.group(1) or image.group(2)
    else:
        for pattern, image_id in _IMAGES:
            if _has(text, pattern):
                ecs["image"] = image_id
                break
    system_disk = _size(text, _SYSTEM_DISK)
    if system_disk:
        ecs["system_disk"] = system_disk
    data_disk = _size(text, _DATA_DISK)
    if data_disk:
        ecs["data_disk"] = data_disk
    disks = (re.search(rf"({NUMBER})\s*{MEASURE}?\s*(?:[\w.-]+\s+){{0,2}}?(?:data\s+disks|数据盘)", text, re.IGNORECASE)
             or re.search(rf"(?:data\s+disks|数据盘)\s*(?:x\s*)?({NUMBER})\s*{MEASURE}", text, re.IGNORECASE))
    if disks and is_count(text, disks.start(1), disks.end(1)):
        amount = number(disks.group(1))
        if amount and 1 < amount <= 16:
            ecs["data_disk_count"] = amount
            ecs.setdefault("data_disk", ecs.get("data_disk") or 100)
    categories = _disk_categories(text)
    if "system" in categories:
        ecs["system_disk_category"] = categories["system"]
    if "data" in categories and (ecs.get("data_disk") or "system" not in categories):
        ecs["data_disk_category"] = categories["data"]
        ecs.setdefault("data_disk", 100)
    host = _first(r"(?:\bhost ?name|主机名)\s*(?:is|=|:|of|为|是)?\s*[\"'`]?([a-z][a-z0-9-]{1,62})", text)
    if host:
        ecs["hostname"] = host
    return ecs


def _parse_rds(text: str) -> dict[str, Any]:
    """RDS engine, version, class, storage, account, HA and backup retention written in the text."""
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
        version = re.search(r"mariadb\s*v?(\d{2}\.\d)", text, re.IGNORECASE)
        if version:
            rds["version"] = version.group(1)
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
    backup = (re.search(r"(\d+)\s*(?:-\s*)?days?\s*(?:of\s+)?backups?(?:\s+retention)?", text, re.IGNORECASE)
              or re.search(r"backups?\s*(?:retention|kept|retained)?\s*(?:of|for|:)?\s*(\d+)\s*days?", text, re.IGNORECASE)
              or re.search(r"备份(?:保留|保存)\s*(\d+)\s*天", text))
    if backup and 7 <= int(backup.group(1)) <= 730:
        rds["backup_days"] = int(backup.group(1))
    return rds


_NOT_NAMES = {"with", "and", "for", "that", "to", "in", "named", "called", "name", "password", "of", "the", "a", "an", "on",
              "at", "by", "from", "as", "is", "it", "this", "its", "versioning", "private", "public", "which", "where", "version",
              "storage", "retention", "encryption", "type", "class", "size", "memory", "or", "plus", "each", "per"}


def _parse_redis(text: str) -> dict[str, Any]:
    redis: dict[str, Any] = {}
    version = re.search(r"(?:redis|version|版本)\s*v?(\d\.\d)", text, re.IGNORECASE)
    if version:
        redis["version"] = version.group(1)
    redis_class = re.search(r"\b(redis\.[a-z0-9]+(?:\.[a-z0-9]+)+)\b", text, re.IGNORECASE)
    if redis_class:
        redis["class"] = redis_class.group(1).lower()
    else:
        memory = (re.search(r"(?:memory|ram|内存)\s*(?:of\s+|为|:)?\s*(\d+)\s*(?:gb|gib|g)\b", text, re.IGNORECASE)
                  or re.search(r"(\d+)\s*(?:gb|gib|g)\s*(?:of\s+)?(?:memory|ram|内存)", text, re.IGNORECASE)
                  or re.search(r"redis(?:(?!\band\b|[;]).){0,60}?(\d+)\s*(?:gb|gib|g)\b"
                               r"(?!\s*(?:of\s+)?(?:\w+\s+)?(?:disks?|storage|云盘|磁盘|存储))", text, re.IGNORECASE))
        if memory:
            redis["class"] = redis_class_for(int(memory.group(1)))
    return redis


# Standard (master-replica) KVStore classes by memory in GB: the smallest that holds the request.
_REDIS_CLASSES = [(1, "redis.master.small.default"), (2, "redis.master.mid.default"), (4, "redis.master.stand.default"),
                  (8, "redis.master.large.default"), (16, "redis.master.2xlarge.default"),
                  (32, "redis.master.4xlarge.default")]


def redis_class_for(gigabytes: int) -> str:
    return next((name for size, name in _REDIS_CLASSES if gigabytes <= size), _REDIS_CLASSES[-1][1])


def _parse_oss(text: str) -> dict[str, Any]:
    oss: dict[str, Any] = {}
    name = (re.search(r"(?:bucket|存储桶)\s*[:=]?\s*(?:named|called|name|名为|名称为|叫做?)?\s*"
                      r"[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)", text, re.IGNORECASE)
              or re.search(r"(?:name\s+it|rename\s+(?:it\s+)?to|名字改成|名字叫|命名为)\s*[\"'`]?([a-z0-9][a-z0-9-]{2,62})", text,
                           re.IGNORECASE))
    if name and name.group(1).lower() not in _NOT_NAMES:
        oss["name"] = name.group(1).lower()
    if _has(text, r"\bkms\b"):
        oss["encryption"] = "KMS"
    if _has(text, r"public[- ]read|公共读"):
        oss["acl"] = "public-read"
    elif _has(text, r"\bprivate\b|私有"):
        oss["acl"] = "private"
    if _has(text, r"versioning|versioned|多版本|版本控制"):
        oss["versioning"] = True
    expire = (re.search(r"(?:expire|delete|remove|过期|删除)\w*\s*(?:old\s+)?(?:objects?\s*|files?\s*)?"
                        r"(?:after|in|older than)?\s*"
                        r"(\d+)\s*(?:days?|天)", text, re.IGNORECASE)
              or re.search(r"(\d+)\s*(?:-\s*)?(?:days?|天)\s*(?:后)?\s*(?:过期|删除|expir\w*|lifecycle)", text, re.IGNORECASE)
              or re.search(r"lifecycle[^.;,]*?(\d+)\s*(?:days?|天)", text, re.IGNORECASE))
    if expire and 0 < int(expire.group(1)) <= 36_500:
        oss["expire_days"] = int(expire.group(1))
    if _has(text, r"cold archive|冷归档"):
        oss["storage_class"] = "ColdArchive"
    elif _has(text, r"\barchive\b|归档"):
        oss["storage_class"] = "Archive"
    elif _has(text, r"infrequent[- ]access|\bia\b|低频"):
        oss["storage_class"] = "IA"
    return oss


def _put_found(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def _parse_mongodb(text: str) -> dict[str, Any]:
    """MongoDB version ("MongoDB 6.0", "version 4.4"), class ("dds.mongo.mid") and storage."""
    mongo: dict[str, Any] = {}
    _put_found(mongo, "version", _first(r"(?:mongo ?(?:db)?|version|版本)\s*v?(\d\.\d)", text))
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


_NOT_DOMAINS = re.compile(r"^(?:ecs|redis|mysql|pg|mssql|polar|dds|slb|rds|mariadb)\."
                          r"|\.(?:js|py|tf|ya?ml|json|sh|vhd|zip|txt|md)$", re.IGNORECASE)


def _parse_dns(text: str) -> dict[str, Any]:
    """A DNS record: its full name ("www.example.com"), type and value (an address, a host, or our load balancer)."""
    dns: dict[str, Any] = {}
    names = [n for n in re.findall(r"(?<![\w.-])((?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})\b", text,
                                   re.IGNORECASE)
             if not _NOT_DOMAINS.search(n) and not re.fullmatch(r"[\d.]+", n) and not n.lower().endswith(".aliyuncs.com")]
    target = re.search(r"(?:to|pointing to|points to|pointing at|resolv\w* to|指向|解析到|->|=>|→)\s*((?:\d{1,3}\.){3}\d{1,3}|"
                       r"(?:[a-z0-9-]+\.)+[a-z]{2,24})", text, re.IGNORECASE)
    if names:
        name = names[0].lower()
        if target and target.group(1).lower() == name and len(names) > 1:
            name = names[1].lower()
        dns["name"] = name
    if target and target.group(1).lower() != dns.get("name"):
        dns["value"] = target.group(1).lower()
    kind = re.search(r"\b(aaaa|cname|txt|mx|a)\s*(?:records?|记录)", text, re.IGNORECASE)
    if kind:
        dns["type"] = kind.group(1).upper()
    ttl = re.search(r"\bttl\s*(?:of|=|:)?\s*(\d+)", text, re.IGNORECASE)
    if ttl:
        dns["ttl"] = int(ttl.group(1))
    return dns


_RAM_PRINCIPALS = [(r"\b(ecs|fc|cs|ros|oss|log|ess|ack)\.aliyuncs\.com", ""),
                   (r"function compute|\bfc\b|函数计算", "fc.aliyuncs.com"),
                   (r"\back\b|kubernetes|\bk8s\b|容器服务", "cs.aliyuncs.com"),
                   (r"\bros\b|resource orchestration|资源编排", "ros.aliyuncs.com"),
                   (r"\becs\b|instances?|servers?|实例|服务器", "ecs.aliyuncs.com")]
_EXPLICIT_ACTION = re.compile(r"(?<![\w.])([a-z]{2,12}:[A-Z*][A-Za-z*]*)(?![\w])")


def _role_clause(text: str) -> str:
    """The text that describes the role: from its noun to the end of its clause, and a Chinese "给/供 X 用的" before it."""
    role = re.search(m.BLOCK_PATTERNS["ram"], text, re.IGNORECASE)
    if not role:
        return text
    end = m.CLAUSE_END.search(text, role.end())
    start = max(0, text.rfind(",", 0, role.start()) + 1, text.rfind(";", 0, role.start()) + 1)
    return text[start:end.start() if end else len(text)]


def _parse_ram(text: str) -> dict[str, Any]:
    """A RAM role: who assumes it (ECS, FC, ACK, ROS) and the access its policy grants, as written."""
    ram: dict[str, Any] = {}
    name = (re.search(r"(?:role|角色)\s*(?:named|called|name|名为|叫)\s*[\"'`]?([a-z][a-z0-9-]{1,63})[\"'`]?", text,
                      re.IGNORECASE)
            or re.search(r"(?:role|角色)\s+[\"'`]?([a-z][a-z0-9]*-[a-z0-9-]+)[\"'`]?", text, re.IGNORECASE))
    if name:
        ram["name"] = name.group(1)
    clause = _role_clause(text)
    for scope in (clause, text):
        for pattern, service in _RAM_PRINCIPALS:
            found = re.search(pattern, scope, re.IGNORECASE)
            if found:
                ram["principal"] = service or f"{found.group(1).lower()}.aliyuncs.com"
                break
        if "principal" in ram:
            break
    explicit = list(dict.fromkeys(_EXPLICIT_ACTION.findall(text)))
    read_only = _has(text, r"read[- ]?only|\bread(?:s|ing|able)?\b|只读|读取")
    actions: list[str] = list(explicit)
    if not explicit:
        if _has(clause, r"\boss\b|buckets?|对象存储|存储桶") or _has(text, r"access to (?:the\s+)?(?:oss|bucket)"):
            actions += ["oss:GetObject", "oss:ListObjects"] if read_only else ["oss:GetObject", "oss:ListObjects",
                                                                                "oss:PutObject", "oss:DeleteObject"]
        if _has(clause, r"\bkms\b|decrypt|解密"):
            actions += ["kms:Decrypt"]
        if _has(clause, r"log service|\bsls\b|\blogs?\b|日志"):
            actions += ["log:GetLogStoreLogs"] if read_only and not _has(clause, r"\bwrite|写") else ["log:PostLogStoreLogs"]
    if actions:
        ram["actions"] = actions
    bucket = re.search(r"(?:bucket|存储桶)\s*(?:named|called|name|名为)?\s*[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)", text,
                       re.IGNORECASE)
    if bucket and bucket.group(1).lower() not in _NOT_NAMES:
        ram["bucket"] = bucket.group(1).lower()
    return ram


_FC_RUNTIMES = [(r"python\s*3\.12", "python3.12"), (r"python\s*3\.9", "python3.9"), (r"python", "python3.10"),
                (r"node(?:\.?js)?\s*20\b", "nodejs20"), (r"node(?:\.?js)?\s*16\b", "nodejs16"),
                (r"node\.?js|\bnode\s*18\b", "nodejs18"),
                (r"\bjava\s*8\b", "java8"), (r"\bjava\b", "java11"), (r"\bgo(?:lang)?\b", "go1"), (r"\bphp\b", "php7.2")]


def _parse_ess(text: str) -> dict[str, Any]:
    """Auto scaling bounds: "between 2 and 10", "min 2 max 10", "from 2 to 10 instances", "最少两台最多十台"."""
    ess: dict[str, Any] = {}
    pair = (re.search(rf"between\s+({NUMBER})\s+and\s+({NUMBER})", text, re.IGNORECASE)
            or re.search(rf"(?:from|scal\w*\s+from)\s+({NUMBER})\s+(?:to|up to)\s+({NUMBER})", text, re.IGNORECASE)
            or re.search(rf"(?<![A-Za-z0-9_.])({NUMBER})\s*(?:-|~|to|到|至)\s*({NUMBER})\s*"
                         rf"(?:台|个|(?:[\w.-]+\s+)?(?:instances?|servers?|vms?)|ecs\.|(?:[\w.-]+\s+)?ubuntu)", text,
                         re.IGNORECASE))
    if pair:
        low, high = number(pair.group(1)), number(pair.group(2))
        if low is not None and high is not None:
            ess["min"], ess["max"] = low, high
    low_match = re.search(rf"(?:min(?:imum)?|at least|最少|最小)\s*(?:of|=|:|为|size)?\s*({NUMBER})", text, re.IGNORECASE)
    high_match = re.search(rf"(?:max(?:imum)?|at most|up to|最多|最大)\s*(?:of|=|:|为|size)?\s*({NUMBER})", text, re.IGNORECASE)
    if low_match and number(low_match.group(1)) is not None:
        ess["min"] = number(low_match.group(1))
    if high_match and number(high_match.group(1)) is not None:
        ess["max"] = number(high_match.group(1))
    return ess


def _parse_ack(text: str) -> dict[str, Any]:
    """An ACK managed cluster: node count, node instance type, Kubernetes version, a public API endpoint if asked."""
    ack: dict[str, Any] = {}
    nodes = (re.search(rf"(?<![A-Za-z0-9_.])({QUANTITY})\s*{MEASURE}?\s*(?:[\w.-]+\s+){{0,2}}?(?:worker\s+)?"
                       rf"(?:nodes?(?![\w.])|节点)", text, re.IGNORECASE)
             or re.search(rf"(?:nodes?|节点)\s*(?:count)?\s*[:=]?\s*({NUMBER})\s*{MEASURE}?(?![\w.])", text, re.IGNORECASE))
    if nodes:
        count = number(nodes.group(1))
        if count and 0 < count <= 100:
            ack["nodes"] = count
    node_type = _INSTANCE_TYPE.search(text)
    if node_type:
        ack["node_type"] = node_type.group(1).lower()
    version = re.search(r"(?:kubernetes|k8s|ack|version|版本)\s*v?(1\.\d{2}(?:\.\d+)?)", text, re.IGNORECASE)
    if version:
        ack["version"] = version.group(1)
    if _has(text, r"public (?:api|endpoint)|api server .*(?:public|internet)|公网访问|公网\s*api"):
        ack["public_api"] = True
    return ack


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
    timeout = (re.search(r"(?:timeout|超时)\s*(?:of|=|:|为)?\s*(\d+)\s*(?:s|sec|seconds?|秒)?\b", text, re.IGNORECASE)
               or re.search(r"(\d+)\s*(?:-\s*)?(?:s|sec|seconds?|秒)\s*(?:timeout|超时)", text, re.IGNORECASE))
    if timeout and 1 <= int(timeout.group(1)) <= 86400:
        fc["timeout"] = int(timeout.group(1))
    name = (re.search(r"function\s*(?:named|called|name|名为|叫)\s*[\"'`]?([a-z][a-z0-9_-]{1,63})[\"'`]?", text, re.IGNORECASE)
            or re.search(r"函数\s*(?:名为|叫)?\s*([a-z][a-z0-9_]*-[a-z0-9_-]+)", text, re.IGNORECASE))
    if name:
        fc["function"] = name.group(1)
    if _has(text, r"\bhttp\b|\bhttps? trigger|\bapi\b|web ?hook|\burl\b|http\s*触发器|触发器"):
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
    """Log Service: project and logstore names, retention ("keep logs for 90 days", "保存30天", "TTL 7 days"), shards."""
    sls: dict[str, Any] = {}
    project = re.search(r"(?:(?:log\s+)?project|日志(?:服务)?项目)\s*[:=]?\s*(?:named|called|name|名为|叫)?\s*"
                        r"[\"'`]?([a-z0-9][a-z0-9-]{2,62})[\"'`]?(?=\W|$)", text, re.IGNORECASE)
    if project and project.group(1).lower() not in _NOT_NAMES:
        sls["project"] = project.group(1).lower()
    store = re.search(r"(?:log ?store|日志库)\s*[:=]?\s*(?:named|called|name|名为|叫)?\s*[\"'`]?([a-z0-9][a-z0-9_-]{2,62})[\"'`]?"
                      r"(?=\W|$)", text, re.IGNORECASE)
    if store and store.group(1).lower() not in _NOT_NAMES:
        sls["logstore"] = store.group(1).lower()
    ttl = (re.search(r"(?:keep|retain|retention|store|保存|保留|\bttl)\w*\s*(?:logs?\s*)?(?:for|of|:|=)?\s*(\d+)\s*(?:days?|天)",
                     text, re.IGNORECASE)
           or re.search(r"(\d+)\s*(?:-\s*)?(?:days?|天)\s*(?:of\s+)?(?:retention|保存|保留)", text, re.IGNORECASE)
           or re.search(r"(?:log ?store|日志库)[^.;]{0,12}?\(\s*(\d+)\s*(?:days?|天)\s*\)", text, re.IGNORECASE))
    if ttl and 0 < int(ttl.group(1)) <= 3650:
        sls["ttl"] = int(ttl.group(1))
    shards = re.search(r"(\d+)\s*(?:shards?|个分片|分片)|shards?\s*[:=]?\s*(\d+)", text, re.IGNORECASE)
    if shards:
        value = int(shards.group(1) or shards.group(2))
        if 0 < value <= 256:
            sls["shards"] = value
    return sls


def _parse_tags(text: str) -> dict[str, str]:
    """Tags asked for: "tags environment=prod, owner=alice" or "add tags for environment and owner"."""
    match = re.search(r"(?:\btags?\b|标签)\s*(.*)$", text, re.IGNORECASE | re.DOTALL)
    if not match:
        return {}
    clause = re.split(r"[;\n]|\.(?=\s|$)", match.group(1))[0]
    pairs = dict(re.findall(r"([A-Za-z][\w-]*)\s*[=:]\s*([\w.@-]+)", clause))
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
    if _has(text, r"terraform|\bhcl\b|\btf\b|\.tf\b|alicloud provider"):
        return "terraform"
    if _has(text, r"\bjson\b"):
        return "ros-json"
    if _has(text, r"\byaml\b|\bros\b|资源编排"):
        return "ros-yaml"
    return None


# ---------------------------------------------------------------- values read by what they qualify

_NAMING = (r"(?:\bnamed|\bcalled|\bname(?:d)?\s*(?:is|=|:)|\bwith\s+(?:the\s+)?name|\bname\s+it|\brename(?:d)?\s+(?:it\s+)?to"
           r"|名为|名称为|名称是|名字是|名字改成|名字叫|叫做?|命名为)\s*[\"'`]?([A-Za-z][A-Za-z0-9_.-]{0,62}[A-Za-z0-9])[\"'`]?")


def _names(reading: Reading) -> dict[str, str]:
    """Names given to blocks ("a VPC named prod-vpc", "名为 prod-sg 的安全组"), each to the block it is written with."""
    found: dict[str, str] = {}
    for match in re.finditer(_NAMING, reading.text, re.IGNORECASE):
        name = match.group(1)
        before = reading.text[max(0, match.start() - 20):match.start()].lower()
        if name.lower() in _NOT_NAMES or re.search(r"(?:account|user(?:name)?|账号|用户|function|函数|role|角色|log ?store|日志库"
                                                   r"|project|项目)\s*$", before):
            continue
        owner = reading.owner(match.start(1), match.end(1), NAMEABLE)
        if owner is None and reading.previous and re.match(r"\s*(?:name\s+it|rename|名字改成|命名为)", match.group(0), re.I):
            owner = next((block for block in ("oss", "ecs", "vpc", "redis") if reading.previous.get(block)), None)
        if owner in NAMEABLE:
            found.setdefault(owner, name)
    return found


def _owned_values(reading: Reading, delta: dict[str, Any]) -> None:
    """Sizes, versions, bandwidths and sources written apart from their noun, given to the block they qualify."""
    text = reading.text
    typed = r"(?!\s*(?:of\s+)?(?:memory|ram|内存|\w*\s*disks?|盘|云盘|storage|存储))"
    for match in re.finditer(rf"(?<![A-Za-z0-9_.])(\d+)\s*({_SIZE_UNIT}){typed}", text, re.IGNORECASE):
        if re.search(r"(?:memory|ram|内存|disks?|盘|storage|存储|size|大小)\s*(?:of|:|=|为)?\s*$",
                     text[max(0, match.start() - 16):match.start()], re.IGNORECASE):
            continue
        owner = reading.owner(match.start(), match.end(), ("rds", "redis", "mongodb", "ecs", "nas", "polardb"))
        size = _size_gb(match.group(1), match.group(2))
        if owner in ("rds", "mongodb"):
            delta[owner].setdefault("storage", size)
        elif owner == "redis" and "class" not in delta["redis"]:
            delta["redis"]["class"] = redis_class_for(size)
        elif owner == "ecs" and not re.search(r"\d\s*(?:vcpus?|cpus?|cores?|核|c)\s*(?:,|and|和|/)?\s*$",
                                              text[max(0, match.start() - 16):match.start()], re.IGNORECASE):
            delta["ecs"].setdefault("data_disk", size)
    for match in re.finditer(r"(?<![A-Za-z0-9_.])(\d\.\d)(?![\w.])", text):
        owner = reading.owner(match.start(), match.end(), ("redis", "mongodb", "rds"))
        if owner == "redis" and "version" not in delta["redis"] and match.group(1) in ("4.0", "5.0", "6.0", "7.0"):
            delta["redis"]["version"] = match.group(1)
        elif owner == "mongodb" and "version" not in delta["mongodb"]:
            delta["mongodb"]["version"] = match.group(1)
    for match in re.finditer(r"(\d+)\s*(?:mbps|mb/s|m\b|兆)(?:\s*(?:of\s+)?(?:bandwidth|带宽))?", text, re.IGNORECASE):
        owner = reading.owner(match.start(), match.end(), ("eip", "slb", "nat"))
        value = int(match.group(1))
        if owner == "eip" and 1 <= value <= 10000:
            delta["eip"].setdefault("bandwidth", value)
        elif owner == "slb" and 1 <= value <= 10000:
            delta["load_balancer"].setdefault("bandwidth", value)
    bandwidth = re.search(r"(?:bandwidth|带宽)\s*(?:of|=|:|为)?\s*(\d+)", text, re.IGNORECASE)
    if bandwidth:
        owner = reading.owner(bandwidth.start(), bandwidth.end(), ("eip", "slb"))
        if owner == "eip":
            delta["eip"].setdefault("bandwidth", int(bandwidth.group(1)))
        elif owner == "slb":
            delta["load_balancer"].setdefault("bandwidth", int(bandwidth.group(1)))


def _whitelists(reading: Reading, rules: list[dict[str, str]], delta: dict[str, Any]) -> None:
    """A source no port rule took (or one written with a database) is that database's allow-list."""
    taken = {rule["source"] for rule in rules}
    for cidr, position in cidrs(reading.text)["source"]:
        owner = reading.owner(position, position + len(cidr), ("rds", "redis", "mongodb", "polardb"))
        if owner is None or (cidr in taken and not re.search(r"white ?list|白名单|reachable|accessible",
                                                             reading.text[max(0, position - 40):position], re.IGNORECASE)):
            continue
        delta[owner].setdefault("whitelist", cidr)


# ---------------------------------------------------------------- the delta


_EXISTING_VPC = r"\bexisting\s+(?:vpc|network)\b|(?:已有|现有|已经有)的?\s*(?:vpc|专有网络)"
_PARSERS = {"oss": _parse_oss, "sls": _parse_sls, "mongodb": _parse_mongodb, "polardb": _parse_polardb, "dns": _parse_dns,
            "nas": _parse_nas, "fc": _parse_fc, "ack": _parse_ack, "ess": _parse_ess}


def _blocks(reading: Reading, delta: dict[str, Any]) -> None:
    """Which blocks the request creates, and which it removes ("remove the NAT gateway", "ALB instead of the SLB")."""
    text, creating = reading.text, reading.creating
    replaced = re.search(r"(?P<new>[\w\s-]{1,40}?)\s+instead\s+of\s+(?P<old>[\w\s'-]{1,40})|"
                         r"(?:replace|swap)\s+(?:the\s+)?(?P<old2>[\w\s-]{1,30}?)\s+(?:with|by)\s+(?P<new2>[\w\s-]{1,30})"
                         r"|把\s*(?P<old3>\S+?)\s*换成\s*(?P<new3>\S+)", text, re.IGNORECASE)
    old_text = (replaced.group("old") or replaced.group("old2") or replaced.group("old3")) if replaced else ""
    if old_text:
        old_start = text.find(old_text, replaced.start())  # type: ignore[union-attr]
        reading.creating = m.blank(creating, old_start, old_start + len(old_text))
        reading.spans = m.all_spans(reading.creating)
    for block in BLOCK_ORDER:
        removing = reading.previous is not None and (
            (_has(text, rf"{_REMOVE}(?:{m.BLOCK_PATTERNS[block]})")
             and not _has(text, rf"\badd\b[^.]*(?:{m.BLOCK_PATTERNS[block]})"))
            or (bool(old_text) and m.mentions(block, old_text) and bool(reading.previous.get(_SPEC_KEY.get(block, block)))))
        if removing:
            delta["remove"].append(block)
            continue
        if not reading.mentioned(block):
            continue
        if block == "slb" and (reading.mentioned("alb") or reading.mentioned("nlb")) and not _has(creating, r"\bslb\b|\bclb\b"):
            continue
        if block == "ram" and not _has(creating, r"\bram\b|\biam\b|\brole|角色|polic"):
            continue
        delta["add"].append(block)


_STATED = re.compile(r"(?<![\w.])(?:\d{1,3}(?:\.\d{1,3}){3}/\d{1,2}|(?:ecs|redis|mysql|pg|mssql|mariadb|dds|polar|slb)"
                     r"\.[a-z0-9-]+(?:\.[a-z0-9-]+)+)(?![\w.])", re.IGNORECASE)


def stated_values(prompt: str) -> list[str]:
    """Values a request states that a template uses verbatim: CIDRs, zones, regions, instance types and classes.

    ``generate`` names the ones its template does not contain, so no stated value is dropped in silence.
    """
    text = m.blank_all(normalize(prompt), m.HOST)
    found = [match.group(0) for match in _STATED.finditer(text)]
    found += [zone.lower() for zone in _ZONE.findall(text)]
    found += [region.lower() for region in _REGION.findall(text)]
    return list(dict.fromkeys(found))


_RECENT_SIZE = 64
_recent: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
_recent_lock = threading.Lock()


def parse_request(prompt: str, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything a request says, as a delta: only mentioned things are present.

    A turn reads its request twice (to choose the skill, then to generate): the last few readings are kept, in a
    bounded cache, and each caller gets its own copy.
    """
    key = (prompt, json.dumps(previous, sort_keys=True, default=str) if previous else "")
    with _recent_lock:
        if key in _recent:
            _recent.move_to_end(key)
            return copy.deepcopy(_recent[key])
    delta = _read(prompt, previous)
    with _recent_lock:
        _recent[key] = copy.deepcopy(delta)
        while len(_recent) > _RECENT_SIZE:
            _recent.popitem(last=False)
    return delta


def _read(prompt: str, previous: dict[str, Any] | None) -> dict[str, Any]:
    reading = Reading(prompt, previous)
    text = reading.text
    delta: dict[str, Any] = {"unmapped": list(reading.unmapped), "add": [], "remove": [], "names": {}, "eip": {},
                             "load_balancer": {}}
    fmt = _format_of(text)
    if fmt:
        delta["format"] = fmt
    _blocks(reading, delta)
    _parse_network(reading, delta)
    owners = {f"type@{match.start()}": reading.owner(match.start(), match.end(), ("ecs", "ack", "ess"))
              for match in _INSTANCE_TYPE.finditer(text)}
    delta["ecs"] = _parse_ecs(reading, owners)
    delta["rds"] = _parse_rds(text)
    delta["redis"] = _parse_redis(text)
    for block, parser in _PARSERS.items():
        delta[block] = parser(text) if block in delta["add"] or (previous and previous.get(block)) else {}
    delta["ram"] = _parse_ram(text) if "ram" in delta["add"] else {}
    if delta["ack"]:  # the cluster's node type is an instance type written with the cluster, not the instances'
        node_types = [match.group(1).lower() for match in _INSTANCE_TYPE.finditer(text)
                      if owners.get(f"type@{match.start()}") == "ack"]
        if node_types:
            delta["ack"]["node_type"] = node_types[0]
        elif any(owners.get(f"type@{match.start()}") == "ecs" for match in _INSTANCE_TYPE.finditer(text)):
            delta["ack"].pop("node_type", None)
    eip = count_of(reading.creating, r"\beips?\b|elastic (?:public )?ips?|弹性公网\s*ips?|弹性\s*ips?|alicloud_eip_address")
    if eip:
        relative = bool(previous and previous.get("eip") and _ADD_WORDS.search(text))
        delta["eip"]["count"] = (eip[0], relative)
    elif previous and previous.get("eip") and re.search(r"\b(?:a\s+)?second\s+(?:eip|elastic ip)|第二个\s*(?:eip|弹性)", text,
                                                        re.IGNORECASE):
        delta["eip"]["count"] = (1, True)
    if "ess" in delta["add"]:
        delta["add"] = [block for block in delta["add"] if block != "ecs"]  # the group launches the instances
    ports, listeners, asked = _ports(reading)
    rules = _parse_rules(reading, ports) if ports else []
    lb_named = any(block in delta["add"] for block in ("slb", "alb", "nlb")) or bool(previous and previous.get("load_balancer"))
    compute = any(block in delta["add"] for block in ("ecs", "ess", "ack", "security_group")) or bool(
        previous and (previous.get("ecs") or previous.get("security_group")))
    if lb_named:
        chosen = _listener_ports(reading, listeners)
        if chosen:
            delta["load_balancer"]["listeners"] = chosen
    elif listeners:
        delta["unmapped"] += [f"port {port.split('/')[0]} (nothing in the template listens on it)" for _, port, _ in listeners]
    if rules and (asked or compute) and (delta["add"] or previous):
        delta["rules"] = rules
    elif not ports and previous and previous.get("security_group") and not delta["add"]:
        sources = _sources(text)
        if len(sources) == 1:
            delta["restrict_source"] = sources[0][1]
    elif rules and not lb_named and (delta["add"] or previous):
        delta["unmapped"] += [f"port {rule['port_range'].split('/')[0]} (nothing in the template listens on it)"
                              for rule in rules]
    _owned_values(reading, delta)
    _whitelists(reading, delta.get("rules", []), delta)
    for block, name in _names(reading).items():
        delta["names"][block] = name
    slb_spec = _first(r"\b(slb\.s\d\.[a-z0-9]+)\b", text)
    if slb_spec:
        delta["load_balancer"]["spec"] = slb_spec.lower()
    if _has(text, r"\b(?:public|internet[- ]facing|公网)\b|公网|\binternet\b(?!\s+access)(?<!reach the internet)"
                  r"(?<!to the internet)"):
        delta["public"] = True
    if _has(text, r"\bprivate\b(?!\s+(?:acl|bucket|oss|instances?|ecs|servers?|vswitch))|intranet|internal|内网|私网"):
        delta["public"] = False
    tags = _parse_tags(text)
    if tags:
        delta["tags"] = tags
    if _has(text, _EXISTING_VPC):
        delta["existing_vpc"] = True
    return delta
