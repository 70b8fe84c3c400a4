"""The ``offline`` IaC engine, obtained as the kernel obtains it: through the ``iac_code_iac_engines`` hook."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from iac_code.api import IacEngine, IacEngineSpec, ToolContext
from iac_code.testing import make_kernel

TWO_ECS = "Two ECS instances behind an SLB in cn-hangzhou"
TERRAFORM = "Create a VPC with two vSwitches and an ECS instance in Terraform"
CHINESE = "在杭州创建两台ECS，挂在SLB后面"
SSH_OPEN = """\
ROSTemplateFormatVersion: '2015-09-01'
Resources:
  WebSg:
    Type: ALIYUN::ECS::SecurityGroup
    Properties:
      VpcId: vpc-123
      Tags:
        - Key: owner
          Value: web-team
      SecurityGroupIngress:
        - IpProtocol: tcp
          PortRange: 22/22
          SourceCidrIp: 0.0.0.0/0
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield make_kernel({"persistence-dir": str(tmp_path_factory.mktemp("state"))})


@pytest.fixture(scope="module")
def engine(kernel: Any) -> IacEngine:
    offline = kernel.plugins.iac_engines()["offline"].record
    assert isinstance(offline, IacEngineSpec) and offline.description
    return offline.create(kernel)


def _counts(resources: Any) -> dict[str, int]:
    return {entry["type"]: entry["count"] for entry in resources}


def test_the_plugin_implements_the_hook(kernel: Any, engine: IacEngine) -> None:
    info = {i.name: i for i in kernel.plugins.infos()}["runtime-offline"]
    assert "iac_code_iac_engines" in info.hooks and info.status == "active"
    assert engine.name == "offline"


def test_two_ecs_behind_an_slb_is_understood(engine: IacEngine) -> None:
    understanding = engine.understand(TWO_ECS)
    assert understanding.is_infra_intent and understanding.category == "generation"
    assert understanding.confidence == "high" and understanding.other_cloud == ""
    assert understanding.region == "cn-hangzhou"
    counts = _counts(understanding.resources)
    assert counts["ALIYUN::ECS::Instance"] == 2 and counts["ALIYUN::SLB::LoadBalancer"] == 1
    assert counts["ALIYUN::ECS::VPC"] == 1
    assert "2× ALIYUN::ECS::Instance" in understanding.summary and "cn-hangzhou" in understanding.summary


async def test_two_ecs_behind_an_slb_is_the_runtimes_template(kernel: Any, engine: IacEngine, tmp_path: Path) -> None:
    generated = engine.generate(TWO_ECS)
    assert generated.filename == "template.ros.yaml" and generated.media_type == "text/yaml"
    assert generated.not_generated == ()
    document = yaml.safe_load(generated.text)
    assert document["ROSTemplateFormatVersion"] == "2015-09-01"
    assert [(r["name"], r["type"], r["properties"]) for r in generated.resources] == [
        (name, body["Type"], body.get("Properties", {})) for name, body in document["Resources"].items()]
    assert Counter(r["type"] for r in generated.resources)["ALIYUN::ECS::Instance"] == 2
    assert dict(generated.parameters) == document["Parameters"] and "InstancePassword" in generated.parameters
    # The same text the offline runtime writes: its generate_template tool, as the runtime calls it.
    tool = next(spec for spec in kernel.tools().values() if spec.name == "generate_template").create(kernel)
    outcome = await tool.run({"request": TWO_ECS}, ToolContext(cwd=str(tmp_path), language="en", metadata={}))
    assert outcome.private.text == generated.text and outcome.result["fileName"] == generated.filename
    assert engine.generate(TWO_ECS) == generated  # deterministic


def test_terraform_when_asked(engine: IacEngine) -> None:
    generated = engine.generate(TERRAFORM)
    assert generated.filename == "main.tf" and generated.media_type == "text/plain"
    assert generated.parameters == {}
    parsed = hcl2.loads(generated.text)
    assert parsed["resource"]
    types = Counter(r["type"] for r in generated.resources)
    assert types["alicloud_vpc"] == 1 and types["alicloud_vswitch"] == 2 and types["alicloud_instance"] == 1
    vpc = next(r for r in generated.resources if r["type"] == "alicloud_vpc")
    assert vpc["name"] == "vpc" and vpc["properties"]["cidr_block"] == "192.168.0.0/16"  # literals unquoted
    understanding = engine.understand(TERRAFORM)  # kinds still as ROS types
    assert _counts(understanding.resources)["ALIYUN::ECS::VSwitch"] == 2 and understanding.confidence == "high"


def test_a_chinese_request(engine: IacEngine) -> None:
    understanding = engine.understand(CHINESE)
    assert understanding.is_infra_intent and understanding.confidence == "high"
    assert _counts(understanding.resources)["ALIYUN::ECS::Instance"] == 2
    assert understanding.region == "cn-hangzhou"
    assert "基础设施请求" in understanding.summary and "地域 cn-hangzhou" in understanding.summary
    generated = engine.generate(CHINESE)
    assert generated.filename == "template.ros.yaml"
    assert Counter(r["type"] for r in generated.resources)["ALIYUN::SLB::LoadBalancer"] == 1


@pytest.mark.parametrize("prompt", ["deploy my app", "I need a website backend", "部署我的应用到阿里云"])
def test_vague_infrastructure_is_medium(engine: IacEngine, prompt: str) -> None:
    understanding = engine.understand(prompt)
    assert understanding.is_infra_intent and understanding.category == "generation"
    assert understanding.confidence == "medium" and understanding.resources == ()


@pytest.mark.parametrize(("prompt", "cloud"), [("an EC2 instance on AWS", "aws"), ("Azure VM", "azure"),
                                               ("GCP bucket", "gcp"), ("I want to run my app on AWS", "aws"),
                                               ("Two ECS instances", "")])
def test_other_clouds(engine: IacEngine, prompt: str, cloud: str) -> None:
    understanding = engine.understand(prompt)
    assert understanding.other_cloud == cloud and understanding.is_infra_intent


def test_the_equivalent_of_an_aws_request(engine: IacEngine) -> None:
    understanding = engine.understand("an EC2 instance on AWS")
    assert _counts(understanding.resources)["ALIYUN::ECS::Instance"] == 1 and "AWS" in understanding.summary


@pytest.mark.parametrize(("prompt", "category"), [("thanks, the VPC looks great", "chat"), ("hello", "chat"),
                                                  ("What is the difference between an ALB and an NLB?", "question"),
                                                  ("how do I deploy my app?", "question")])
def test_chat_and_questions_are_not_infrastructure(engine: IacEngine, prompt: str, category: str) -> None:
    understanding = engine.understand(prompt)
    assert not understanding.is_infra_intent and understanding.category == category
    assert understanding.confidence == "low" and understanding.resources == ()


@pytest.mark.parametrize(("prompt", "category"), [("list my stacks in cn-beijing", "stack_operation"),
                                                  ("add another vSwitch", "edit"),
                                                  (f"review this template:\n```yaml\n{SSH_OPEN}```", "review")])
def test_other_infrastructure_requests(engine: IacEngine, prompt: str, category: str) -> None:
    understanding = engine.understand(prompt)
    assert understanding.is_infra_intent and understanding.category == category


def test_what_cannot_be_generated_is_named(engine: IacEngine) -> None:
    understanding = engine.understand("an Elasticsearch cluster")
    assert understanding.is_infra_intent and understanding.confidence == "medium"
    assert "Elasticsearch" in understanding.summary
    generated = engine.generate("an Elasticsearch cluster")
    assert generated.text == "" and generated.resources == () and generated.not_generated == ("Elasticsearch",)


def test_review_finds_open_ssh(engine: IacEngine) -> None:
    findings = engine.review(SSH_OPEN)
    assert [(f.severity, f.rule, f.resource) for f in findings] == [("high", "IAC001", "WebSg")]
    assert "SSH" in findings[0].message


def test_review_of_terraform_names_the_resource(engine: IacEngine) -> None:
    findings = engine.review('resource "alicloud_security_group_rule" "ssh" {\n  type = "ingress"\n'
                             '  ip_protocol = "tcp"\n  port_range = "22/22"\n  cidr_ip = "0.0.0.0/0"\n'
                             '  security_group_id = "sg-1"\n}\n')
    assert ("high", "IAC001", "alicloud_security_group_rule.ssh") in [(f.severity, f.rule, f.resource) for f in findings]


def test_review_of_a_generated_template_has_no_high_findings(engine: IacEngine) -> None:
    findings = engine.review(engine.generate(TWO_ECS).text)
    assert findings and all(f.severity in ("medium", "low", "info") for f in findings)
    assert {f.rule for f in findings} <= {"IAC015", "IAC023"}
