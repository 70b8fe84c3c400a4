"""Numbers the way people write them, and the quantity a request attaches to a noun.

Digits, English number words ("twelve", "a dozen", "a pair of"), Chinese numerals with or without a
measure word ("十二台", "两个", "一块"), "x3" / "3x" / "ECS: 3" / "2 of them" and Terraform's ``count = 3``.
A number that belongs to something else is never a count: a version or a year ("Windows Server 2022",
"Ubuntu 22.04", "Redis 7.0"), a port, or a size, bandwidth, duration or core count ("40 GB", "4 核").
"""

from __future__ import annotations

import re

EN_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "a": 1, "an": 1, "single": 1, "another": 1, "both": 2, "dozen": 12,
}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "俩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_EN_WORDS = "|".join(sorted((word for word in EN_NUMBERS if word not in ("a", "an")), key=len, reverse=True))
ZH_NUMERAL = r"[零〇一二两俩三四五六七八九十百]+"
# One quantity: "a dozen", "a pair of", "a couple of", digits, an English word, or a Chinese numeral.
QUANTITY = (rf"(?:a\s+dozen|half\s+a\s+dozen|a\s+(?:pair|couple)\s+of|\d+|(?:{_EN_WORDS})(?![\w-])|an?(?![\w-])"
            rf"|{ZH_NUMERAL})")
# A quantity that is a number (not the article "a"/"an").
NUMBER = rf"(?:a\s+dozen|half\s+a\s+dozen|a\s+(?:pair|couple)\s+of|\d+|(?:{_EN_WORDS})(?![\w-])|{ZH_NUMERAL})"
MEASURE = r"(?:台|个|块|套|组|座|只|条|张|份|位)"
# What may follow a number that is not a count (sizes, speeds, durations, cores, versions, percentages).
NOT_COUNT_AFTER = (r"(?:\s*(?:gi?b|tb|mb|kb|g|t|m|mbps|gbps|m带宽|核|vcpus?|cpus?|cores?|c\d|days?|天|周|weeks?|months?|月"
                   r"|years?|年"
                   r"|hours?|小时|h|minutes?|mins?|分钟|seconds?|secs?|s|秒|ms|毫秒|%|percent|shards?|分片|qps|tps|iops"
                   r"|mb/s|mbit)(?![a-z])|\.\d|:\d|/\d|-\d)")
# Words whose next number is a version, a year or a port, never a count.
VERSION_OWNERS = (r"(?:server|windows|ubuntu|centos|debian|linux|rhel|mysql|postgres(?:ql)?|pg|pgsql|redis|mongo(?:db)?|python"
                  r"|node(?:\.?js)?|java|golang|go|php|dotnet|\.net|version|versions|版本|v|kubernetes|k8s|ack|mariadb|port|ports"
                  r"|端口|ttl|tls|ipv|http|polardb|sql|rds|tcp|udp|listener|listeners|监听|arm|x86|gen|mssql|es|kafka|elasticsearch"
                  r"|retention|保留|保存|timeout|超时|memory|内存|storage|存储|bandwidth|带宽|ssh|rdp|https|size|大小|capacity|容量"
                  r"|disk|disks|盘|系统盘|数据盘|rotation|轮转|lifecycle|expire|expires|expiration|过期)")


def zh_number(text: str) -> int | None:
    """A Chinese numeral up to 999 ("十二" 12, "二十" 20, "两百五十" 250), or None."""
    if not text or not re.fullmatch(ZH_NUMERAL, text):
        return None
    total, current = 0, 0
    for char in text:
        if char in _ZH_DIGITS:
            current = _ZH_DIGITS[char]
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        elif char == "百":
            total += (current or 1) * 100
            current = 0
    return total + current


def number(word: str) -> int | None:
    """The integer a quantity expression means ("12", "twelve", "a dozen", "a pair of", "十二"), or None."""
    word = re.sub(r"\s+", " ", word.strip().lower())
    if word.isdigit():
        return int(word)
    if word in ("a dozen",):
        return 12
    if word == "half a dozen":
        return 6
    if word in ("a pair of", "a couple of"):
        return 2
    if word in EN_NUMBERS:
        return EN_NUMBERS[word]
    return zh_number(word)


def is_count(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` can be a count: not a version, year, port, size or duration."""
    before = text[max(0, start - 24):start].lower()
    after = text[end:end + 12].lower()
    if re.search(rf"(?<![a-z0-9])(?:{VERSION_OWNERS})\s*[:=]?\s*$", before) or re.search(r"[\d.]\s*$|[-–/]\s*$", before):
        return False
    if re.match(NOT_COUNT_AFTER, after):
        return False
    value = number(text[start:end])
    return value is not None and 0 < value <= 1000


def terraform_count(text: str) -> int | None:
    """The value of a Terraform ``count = N`` in the request, if any."""
    match = re.search(r"\bcount\s*[=:]\s*(\d+)\b", text, re.IGNORECASE)
    return int(match.group(1)) if match else None
