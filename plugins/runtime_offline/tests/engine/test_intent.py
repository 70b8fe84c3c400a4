"""Intent from the whole request, and numbers read the way people write them (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest
from iac_code_runtime_offline.engine.generation import generate
from iac_code_runtime_offline.engine.intent import CONVERSION, GENERATION, OPERATIONS, REVIEW, classify
from iac_code_runtime_offline.engine.quantities import is_count, number, zh_number
from iac_code_runtime_offline.engine.request_parsing import parse_request

ISSUE_REQUESTS = [
    "Two ECS instances of type ecs.g7.large behind an SLB, in a new VPC.",
    "VPC with a NAT gateway and an EIP for outbound internet access",
    "An ALB load balancer in a VPC with two vSwitches",
    "Security group in a new VPC: SSH only from the office network 198.51.100.0/24, HTTP and HTTPS from anywhere",
    "Redis 7.0 instance with 4 GB memory in a new VPC, password as a parameter",
    "web tier: 3 台 ECS (ecs.c7.large, Ubuntu) + CLB listener 80 + security group 开放 80/443",
    "两台ECS，挂在SLB后面",
    "能帮我建一个VPC吗？",
    "Could you set up Redis 6.0 for me?",
]


@pytest.mark.parametrize("prompt", ISSUE_REQUESTS)
def test_requests_without_imperative_verbs_generate(prompt: str) -> None:
    assert classify(prompt) == GENERATION


@pytest.mark.parametrize("prompt,expected", [
    ("What is the difference between an ALB and an NLB?", None),
    ("Can an SLB forward traffic to ECS instances in another region?", None),
    ("How do I attach an EIP to an ECS instance?", None),
    ("ECS 和轻量应用服务器有什么区别？", None),
    ("SLB 和 ALB 应该选哪个？", None),
    ("hello there", None),
    ("Review this template: ```yaml\nResources: {}\n```", REVIEW),
    ("Check main.tf for security groups open to the world", REVIEW),
    ("OSS bucket named audit-archive-2027 with versioning", GENERATION),  # "audit" in a name is no review
    ("Convert this Terraform to ROS: resource \"alicloud_vpc\" \"v\" {}", CONVERSION),
    ("convert network.tf to ROS", CONVERSION),
    ("list my stacks", OPERATIONS),
    ("deploy the template as a stack named demo-stack", OPERATIONS),
    ("部署一个Redis缓存", GENERATION),  # deploying a resource is asking for it, not for a stack operation
    ("WordPress stack: one ECS instance and an RDS MySQL", GENERATION),
    ("Elasticsearch cluster with three data nodes", GENERATION),  # so the reply can say it is not supported
    ("add another vSwitch", None),  # an edit, with nothing to edit
])
def test_classify_without_context(prompt: str, expected: str | None) -> None:
    assert classify(prompt) == expected


@pytest.mark.parametrize("prompt,expected", [
    ("Thanks, the VPC template looks great!", None),
    ("谢谢，模板可以用了", None),
    ("ok, the SLB part is fine", None),
    ("add another vSwitch", GENERATION),
    ("Terraform please", GENERATION),
    ("convert it to Terraform", GENERATION),  # a format change, not a Terraform-to-ROS conversion
    ("a second EIP", GENERATION),
    ("再加两台", GENERATION),
    ("restrict it to 198.51.100.0/24, please", GENERATION),
])
def test_classify_in_a_conversation(prompt: str, expected: str | None) -> None:
    previous = generate("Create two ECS instances with SSH open and an EIP in a VPC with two vSwitches").spec
    assert classify(prompt, previous) == expected


@pytest.mark.parametrize("prompt,creates,not_created", [
    ("A RAM role that ECS instances can assume, with a custom policy allowing oss:GetObject", {"ram"}, {"ecs", "oss"}),
    ("Security group for the web servers: 80 and 443 from anywhere", {"security_group"}, {"ecs"}),
    ("NAT gateway so that servers in the private vSwitches can reach the internet", {"nat"}, {"ecs"}),
    ("MySQL database accessible from the ECS instances in 10.0.1.0/24", {"rds"}, {"ecs"}),
    ("Security group rules: MySQL 3306 from the app tier 10.0.1.0/24", {"security_group"}, {"rds"}),
    ("给函数计算用的 RAM 角色，可以读取 OSS 存储桶 media-2027", {"ram"}, {"fc", "oss"}),
    ("Create a NAT gateway with an EIP so two private ECS instances can reach the internet", {"nat", "ecs"}, set()),
    ("A NAS file system for two ECS instances", {"nas", "ecs"}, set()),
    ("Tablestore instance named orders", set(), {"ecs"}),
])
def test_principals_targets_and_sources_create_nothing(prompt: str, creates: set[str], not_created: set[str]) -> None:
    added = set(parse_request(prompt)["add"])
    assert creates <= added and not added & not_created


@pytest.mark.parametrize("text,value", [("十二", 12), ("二十", 20), ("二十五", 25), ("两百五十", 250), ("十", 10), ("两", 2)])
def test_chinese_numerals(text: str, value: int) -> None:
    assert zh_number(text) == value


@pytest.mark.parametrize("word,value", [("twelve", 12), ("a dozen", 12), ("a pair of", 2), ("7", 7), ("三", 3), ("an", 1)])
def test_number_words(word: str, value: int) -> None:
    assert number(word) == value


@pytest.mark.parametrize("text,word,expected", [
    ("Windows Server 2022 ECS instance", "2022", False),
    ("Ubuntu 22.04 server", "04", False),
    ("RDP port 3389 open", "3389", False),
    ("a 100 GB data disk", "100", False),
    ("两台 4 核 16G", "4", False),
    ("2-10 instances", "2", False),
    ("Two ECS instances", "Two", True),
    ("3 台 ECS", "3", True),
])
def test_numbers_that_are_not_counts(text: str, word: str, expected: bool) -> None:
    start = text.index(word)
    assert is_count(text, start, start + len(word)) is expected


@pytest.mark.parametrize("prompt,count", [
    ("Windows Server 2022 ECS instance (ecs.g7.2xlarge) with RDP port 3389", 1),
    ("Twelve web servers behind an NLB", 12),
    ("A pair of ECS instances behind an ALB", 2),
    ("十二台 ECS 实例", 12),
    ("ECS x 3, type ecs.c7.large", 3),
    ("ECS 两台 + SLB 一个", 2),
    ("三台 ECS 做 web，一台做跳板机", 4),
    ("两个可用区各一台 ECS", 2),
    ("Terraform: alicloud_instance with count = 3", 3),
    ("ecs.hfc7.large instance, 2 of them", 2),
])
def test_counts_attach_to_their_noun(prompt: str, count: int) -> None:
    assert generate(prompt).spec["ecs"]["count"] == count


def test_stated_values_not_used_are_named() -> None:
    assert generate("RDS MySQL 8.0 listening on port 3307").unmapped == [
        "port 3307 (nothing in the template listens on it)"]
    terraform = generate("Terraform: PostgreSQL 15 with 7 days of backup retention")
    assert terraform.unmapped and "backup retention of 7 days" in terraform.unmapped[0]
    assert generate("PostgreSQL 15 with 7 days of backup retention").unmapped == []  # ROS has the property
    bucket = generate("Create an OSS bucket in zone cn-hangzhou-h")  # a zone, and nothing placed in zones
    assert bucket.resources == ["oss_bucket"] and bucket.unmapped == ["cn-hangzhou-h (stated, but not used)"]
    assert generate("A KMS key with class redis.master.large.default").unmapped == [
        "redis.master.large.default (stated, but not used)"]


def _spec(**changes: Any) -> dict[str, Any]:
    return {**generate("Create a VPC").spec, **changes}


def test_edits_read_relative_counts() -> None:
    two = generate("Create two ECS instances behind an SLB").spec
    assert generate("three instead of two", two).spec["ecs"]["count"] == 3
    assert generate("再加两台", two).spec["ecs"]["count"] == 4
    assert generate("one instance fewer", two).spec["ecs"]["count"] == 1
    eip = generate("Create an ECS instance with an EIP").spec
    assert generate("a second EIP", eip).spec["eip"]["count"] == 2
    swapped = generate("ALB instead of the SLB", two)
    assert swapped.spec["load_balancer"]["kind"] == "alb" and swapped.spec["ecs"]["count"] == 2
    assert generate("Create a VPC").spec == _spec()
