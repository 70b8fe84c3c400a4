"""What a request asks for, read from the whole request: a template, a review, a conversion, stack operations, or talk.

A request that names catalog resources (or products outside the catalog, so the reply can say so) is a
generation, or an edit of the conversation's template, unless it is clearly a question ("What is the difference
between an ALB and an NLB?", "为什么我的 RDS 连不上？"), chat ("thanks, the VPC looks great"), a review or a
conversion. No imperative verb is needed, in English or Chinese: "Two ECS instances behind an SLB" and
"两台ECS，挂在SLB后面" are requests.
"""

from __future__ import annotations

import re
from typing import Any

from iac_code_runtime_offline.engine.request_parsing import normalize, parse_request

GENERATION = "iac_generation"
REVIEW = "iac_review"
CONVERSION = "terraform_ros_conversion"
OPERATIONS = "aliyun_ros_operations"

_POLITE = (r"^\s*(?:(?:please|pls|kindly|hey|hi|ok(?:ay)?|so|now|and|also|then|can you|could you|would you"
           r"|帮我|请|麻烦|帮忙)[\s,:]+)*")
_REVIEW_VERB = (r"(?<![\w-])(?:review|audit|lint|inspect|check|scan|look over|assess|evaluate)(?![\w-])|审查|检查|评审|审核|扫描"
                r"|看看.{0,12}(?:问题|风险|安全)")
_TEMPLATE_REF = (r"\btemplates?\b|\bmain\.tf\b|[\w./-]+\.(?:tf|ya?ml|json)\b|\bfiles?\b|\bconfig(?:uration)?s?\b|\bcode\b|\bhcl\b"
                 r"|\bthis\b|\babove\b|\bmy (?:terraform|ros|stack)\b|模板|配置|代码|文件|上面|这个")
_INLINE_TEMPLATE = re.compile(r"```|ROSTemplateFormatVersion|^\s*(?:resource|provider|variable|terraform)\s+[\"{]", re.M)
_CONVERT_VERB = r"(?<![\w-])(?:convert|translate|migrate)(?![\w-])|转换|转成|转为|翻译成|迁移"
_TERRAFORM_SOURCE = (r"resource\s+\"alicloud_|provider\s+\"alicloud\"|[\w./-]+\.tf\b|\b(?:this|my|the|following|these|our)\s+"
                     r"(?:terraform|tf|hcl)\b|\bterraform\s+(?:code|config(?:uration)?|files?|modules?|project)\b"
                     r"|\bfrom\s+terraform\b|\b(?:terraform|tf|hcl)\s*(?:to|into|->|→|转成?|转为)\s*ros\b|\balicloud_\w+")
_TO_TERRAFORM = r"\b(?:to|into|as)\s+(?:a\s+)?(?:terraform|hcl|tf)\b|转成\s*terraform|转为\s*terraform|换成\s*terraform"
_STACK_OPS = (r"\b(?:list|delete|remove|show|describe|get|update|create|deploy|launch|preview|validate|check)\b[^.;]{0,30}"
              r"\bstacks?\b|\bstacks?\s+(?:named|called|status|id|events?|outputs?)\b|\bros stacks?\b|资源栈"
              r"|\bstack\s+[0-9a-f]{8}-"
              r"|\bvalidatetemplate\b|\bstatus of\b.{0,20}\bstack\b")
_OPS_VERB = r"\b(?:deploy|validate|preview|launch)\b|部署|校验|验证|预览"
_THE_TEMPLATE = r"\b(?:the|this|that|my|our|it)\s+(?:template|one)\b|\bit\b|模板|这个|上面的"
_QUESTION_EN = (r"^\s*(?:(?:and|so|but|ok(?:ay)?|hmm+|hey|hi|also)[,\s]+)?(?:what(?:'s|s)?(?!\s+about)|why|how(?!\s+about)"
                r"|which|where|when|who|whom"
                r"|whose|explain|tell me (?:about|why|how|what|whether)|describe (?:the|how|what|why)|is|are|was|were|does|do|did"
                r"|can(?!\s+(?:you|u|i\s+(?:get|have)|we\s+(?:get|have)))|could(?!\s+(?:you|u|i\s+(?:get|have)))|should|would"
                r"(?!\s+(?:you|u))|will(?!\s+you)|shall|may(?!\s+i\s+(?:get|have))|difference)\b")
_QUESTION_ZH = (r"什么|为什么|为啥|怎么|怎样|如何|哪个|哪些|哪里|哪种|多少|是否|区别|能否|可不可以|是不是|有没有|应该选"
                r"|吗\s*[?？]?\s*$"
                r"|呢\s*[?？]?\s*$")
_REQUEST_ZH = r"帮我|给我|请|创建|新建|建一个|建个|生成|写一个|写个|来一个|来个|搞一个|搞个|需要|要一个|开通|部署一|申请"
_CHAT = (r"^\s*(?:thanks|thank you|thx|ty|great|nice|cool|perfect|awesome|excellent|lgtm|ok(?:ay)?|fine|got it|sounds good"
         r"|looks good|good job|well done|谢谢|多谢|好的|不错|可以了|没问题|完美|收到|明白|赞)\b|\b(?:looks|is|are|seems)\s+"
         r"(?:great|good|fine|perfect|ok(?:ay)?|correct|right)\b|\bworks?\b|\bworked\b|exactly what"
         r"|可以用了|没问题|挺好|很好|正确")
_EDIT_MARKERS = (r"\b(?:add|remove|delete|drop|change|switch|use|make|also|plus|instead|open|close|rename|increase|decrease|set"
                 r"|put|more|another|extra|replace|move|convert|upgrade|resize|scale|now|but|please)\b|再|加|改|换|删|去掉|开放|增加"
                 r"|添加|也要|还要|另外|\d")


# "add another vSwitch", "再加两台": an edit of a template; with no template in the conversation there is nothing to edit.
_RELATIVE_ONLY = (r"^\s*(?:please\s+)?(?:also\s+)?(?:add\s+)?(?:another|one more|\w+\s+more|more|a second|a third)\b"
                  r"|^\s*(?:再加|再来|再开)")


def _has(text: str, pattern: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def is_question(text: str) -> bool:
    """Whether the request asks something rather than asks for something."""
    if _has(text, _QUESTION_EN):
        return True
    return _has(text, _QUESTION_ZH) and not _has(text, _REQUEST_ZH)


def is_chat(text: str) -> bool:
    """Thanks, approval and small talk that change nothing ("thanks, the VPC template looks great")."""
    return _has(text, _CHAT) and not _has(re.sub(_CHAT, " ", text, flags=re.IGNORECASE), _EDIT_MARKERS)


def wants_review(text: str) -> bool:
    if not _has(text, _REVIEW_VERB):
        return False
    return bool(_has(text, _POLITE + rf"(?:{_REVIEW_VERB})") or _has(text, _TEMPLATE_REF) or _INLINE_TEMPLATE.search(text))


def wants_conversion(text: str) -> bool:
    """Terraform in, ROS out: a conversion verb and Terraform as the source (not "convert it to Terraform")."""
    if not _has(text, _CONVERT_VERB):
        return False
    if _has(text, _TO_TERRAFORM) and not _has(text, r"resource\s+\"alicloud_|[\w./-]+\.tf\b"):
        return False
    return _has(text, _TERRAFORM_SOURCE) or ("terraform" in text.lower() and _has(text, r"\bros\b|资源编排"))


def wants_operations(text: str, mentions_resources: bool) -> bool:
    """ROS stack operations: stacks named, or deploying/validating *the* template (not "部署一个Redis缓存")."""
    if _has(text, _STACK_OPS):
        return True
    return _has(text, _OPS_VERB) and _has(text, _THE_TEMPLATE) and not mentions_resources


def wants_generation(prompt: str, previous: dict[str, Any] | None = None) -> bool:
    """Whether the prompt asks for a template, or (with ``previous``) to edit the one generated before.

    Requests for unsupported things ("an Elasticsearch cluster") count too, so the reply can say so.
    """
    text = normalize(prompt)
    if is_question(text) or is_chat(text):
        return False
    if not previous and _has(text, _RELATIVE_ONLY):
        return False
    delta = parse_request(prompt, previous)
    if delta["add"] or delta["unmapped"]:
        return True
    if not previous:
        return False
    settings = any(delta.get(key) and previous.get(key) for key in (
        "ecs", "rds", "redis", "oss", "sls", "mongodb", "polardb", "dns", "nas", "ram", "fc", "ack", "ess"))
    return bool(delta["remove"] or delta.get("tags") or delta.get("rules") or "format" in delta or "region" in delta
                or "vswitch_count" in delta or "vpc_cidr" in delta or "restrict_source" in delta or delta.get("names")
                or delta["eip"]
                or delta["load_balancer"] or settings)


def classify(prompt: str, previous: dict[str, Any] | None = None) -> str | None:
    """The skill a request asks for (``None``: answer with help)."""
    text = normalize(prompt)
    if wants_review(text):
        return REVIEW
    if wants_conversion(text):
        return CONVERSION
    if _has(text, _STACK_OPS) or _has(text, _OPS_VERB):
        mentions = bool(parse_request(prompt, previous)["add"])
        if wants_operations(text, mentions):
            return OPERATIONS
    if wants_generation(prompt, previous):
        return GENERATION
    return None
