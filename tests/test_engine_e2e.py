"""The offline IaC engine end to end over HTTP: generate, edit, review, convert, deploy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from iac_code.testing import A2A_HEADERS, RunningServer, send_and_answer, send_message_body, start_server
from tests.ros_standin import ros_standin

TERRAFORM = '''
terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "1.230.0"
    }
  }
}

resource "alicloud_vpc" "main" {
  vpc_name   = "demo"
  cidr_block = "172.16.0.0/12"
}

resource "alicloud_vswitch" "app" {
  vpc_id     = alicloud_vpc.main.id
  cidr_block = "172.16.1.0/24"
  zone_id    = "cn-hangzhou-h"
}
'''


async def rpc(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        return await r.json()


async def turn(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    """Send a message and allow every permission it asks (default configuration: writes ask)."""
    return await send_and_answer(lambda b: rpc(http, server, b), body)


def message(text: str, message_id: str, context_id: str, cwd: Path, **metadata: Any) -> dict[str, Any]:
    body = send_message_body(text, message_id=message_id, contextId=context_id)
    body["params"]["message"]["metadata"] = {"iac_code": {"cwd": str(cwd), **metadata}}
    return body


def answer_text(task: dict[str, Any]) -> str:
    """The turn's answer: the final status message."""
    message = task["status"]["message"]
    assert message["role"] == "ROLE_AGENT"
    return message["parts"][0]["text"]  # type: ignore[no-any-return]


def fenced(text: str, language: str = "yaml") -> Any:
    return yaml.safe_load(text.split(f"```{language}\n", 1)[1].split("```", 1)[0])


def resource_types(template: dict[str, Any]) -> list[str]:
    return [r["Type"] for r in template["Resources"].values()]


async def test_generate_edit_review_convert_deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "network.tf").write_text(TERRAFORM)
    async with ros_standin() as ros, start_server() as server, aiohttp.ClientSession() as http:
        monkeypatch.setenv("IACCODE_ALIYUN_ROS_ENDPOINT", ros.endpoint)
        monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAItestkey000000")
        monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret-value")
        ctx = "ctx-e2e"

        # 1. generate
        first = await turn(http, server, message("Create a VPC with two vSwitches in cn-hangzhou", "m1", ctx, tmp_path))
        template = fenced(answer_text(first))
        assert resource_types(template).count("ALIYUN::ECS::VSwitch") == 2
        assert (tmp_path / "template.ros.yaml").exists()
        url = first["artifacts"][0]["parts"][0]["url"]
        assert url.startswith(server.url + "iac-code/artifacts/")
        async with http.get(url) as r:
            assert yaml.safe_load(await r.text()) == template  # what a remote client fetches

        # 2. follow-up edit in the same context
        second = await turn(http, server, message("use 3 vSwitches", "m2", ctx, tmp_path))
        edited = fenced(answer_text(second))
        assert resource_types(edited).count("ALIYUN::ECS::VSwitch") == 3
        assert yaml.safe_load((tmp_path / "template.ros.yaml").read_text()) == edited

        # 3. review the artifact (the workspace file the turn wrote)
        third = await turn(http, server, message("review template.ros.yaml", "m3", ctx, tmp_path))
        report = json.loads(third["artifacts"][0]["parts"][1]["text"])  # small: inline beside its URL
        assert report["format"] == "ros" and "summary" in report

        # 4. convert a Terraform file from the workspace
        fourth = await turn(http, server, message("convert network.tf to ROS", "m4", ctx, tmp_path))
        converted = fenced(answer_text(fourth))
        assert sorted(resource_types(converted)) == ["ALIYUN::ECS::VPC", "ALIYUN::ECS::VSwitch"]

        # 5. CreateStack: a protected API, asks permission, is allowed, reaches the stand-in
        fifth = (await rpc(http, server, message("deploy the template as a stack named demo-stack", "m5", ctx,
                                                 tmp_path)))["result"]["task"]
        envelope = fifth["metadata"]["iac_code"]["input"]
        assert envelope["toolName"] == "aliyun_api" and envelope["title"] == "Create ROS stack"
        assert "CreateStack" not in ros.actions()
        answer = send_message_body("x", message_id="m6", taskId=envelope["requestTaskId"], contextId=ctx)
        answer["params"]["message"]["parts"] = [{"mediaType": "application/json", "data": {
            "schemaVersion": 1, "kind": "permission", "requestTaskId": envelope["requestTaskId"],
            "inputId": envelope["inputId"], "toolUseId": envelope["toolUseId"], "decision": "allow_once"}}]
        # the unary answer returns when the turn stops again, the permission_ack in the history
        got = (await rpc(http, server, answer))["result"]["task"]
        assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert got["metadata"]["iac_code"]["assistantFinal"] == {"complete": True}
        acks = [p["data"] for m in got["history"] for p in m["parts"] if p.get("data", {}).get("kind") == "permission_ack"]
        assert acks == [{"schemaVersion": 1, "kind": "permission_ack", "inputId": envelope["inputId"],
                         "toolUseId": envelope["toolUseId"], "decision": "allow_once", "accepted": True}]
        assert "CreateStack" in ros.actions()
        created = ros.requests[ros.actions().index("CreateStack")]
        assert created["StackName"] == "demo-stack" and "ROSTemplateFormatVersion" in created["TemplateBody"]
        assert "test-secret-value" not in json.dumps(got)


async def test_no_credentials_is_a_clear_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"):
        monkeypatch.delenv(var, raising=False)
    async with ros_standin() as ros, start_server() as server, aiohttp.ClientSession() as http:
        monkeypatch.setenv("IACCODE_ALIYUN_ROS_ENDPOINT", ros.endpoint)
        task = (await rpc(http, server, message("list my stacks", "m1", "ctx-nocreds", tmp_path)))["result"]["task"]
        assert "Alibaba Cloud credentials are not configured" in answer_text(task)
        assert ros.requests == []


async def test_skill_hint_wins(tmp_path: Path) -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        body = message("resource \"alicloud_vpc\" \"v\" {\n  cidr_block = \"10.0.0.0/8\"\n}\n", "m1", "ctx-hint",
                       tmp_path, skill="iac_review")
        task = (await rpc(http, server, body))["result"]["task"]
        assert task["artifacts"][0]["name"] == "review.json"


async def test_unmappable_request_is_said_plainly(tmp_path: Path) -> None:
    async with start_server() as server, aiohttp.ClientSession() as http:
        task = (await rpc(http, server, message("create an Elasticsearch cluster", "m1", "ctx-es", tmp_path)))["result"]
        text = answer_text(task["task"])
    assert "Elasticsearch" in text and "Not included" in text
    assert "artifacts" not in task["task"] and list(tmp_path.iterdir()) == []


async def test_review_report_is_localised(tmp_path: Path) -> None:
    template = "resource \"alicloud_vpc\" \"v\" {\n  cidr_block = \"10.0.0.0/8\"\n}\n"
    async with start_server() as server, aiohttp.ClientSession() as http:
        zh = (await rpc(http, server, message("review this\n" + template, "m1", "ctx-zh", tmp_path,
                                              preferredLanguage="zh")))["result"]["task"]
        en = (await rpc(http, server, message("review this\n" + template, "m2", "ctx-en", tmp_path)))["result"]["task"]
    assert "审查结果" in answer_text(zh) and "Terraform 配置" in answer_text(zh)
    assert answer_text(en).startswith("Review of the Terraform configuration:")
    assert "IAC016" in answer_text(zh) and "IAC016" in answer_text(en)  # rule ids are never translated


CORPUS = Path(__file__).resolve().parents[1] / "plugins" / "runtime_offline" / "tests" / "engine" / "conversion_corpus"


def _count(template: dict[str, Any], kind: str) -> int:
    return resource_types(template).count(kind)


def _props(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == kind]


# family: (generate, must contain, follow-up edit, check of the edited template, Terraform file, type it converts to)
FAMILIES: dict[str, tuple[str, str, str, Any, str, str]] = {
    "slb": ("Create two ECS instances behind a load balancer", "ALIYUN::SLB::BackendServerAttachment",
            "make it three instances", lambda t: _count(t, "ALIYUN::ECS::Instance") == 3,
            "04_load_balancers.tf", "ALIYUN::SLB::LoadBalancer"),
    "alb": ("Create two ECS instances behind an ALB", "ALIYUN::ALB::ServerGroup",
            "add a data disk of 200 GB", lambda t: _props(t, "ALIYUN::ECS::Instance")[0]["DiskMappings"][0]["Size"] == 200,
            "09_lb_listeners_backends.tf", "ALIYUN::ALB::Listener"),
    "nlb": ("Create two ECS instances behind a network load balancer", "ALIYUN::NLB::Listener",
            "make it three instances", lambda t: len(_props(t, "ALIYUN::NLB::BackendServerAttachment")[0]["Servers"]) == 3,
            "14_nlb.tf", "ALIYUN::NLB::ServerGroup"),
    "databases": ("Create a PolarDB MySQL 8.0 cluster and a MongoDB 6.0 instance", "ALIYUN::MONGODB::Instance",
                  "also add a Redis 7.0 with 4 GB",
                  lambda t: _props(t, "ALIYUN::REDIS::Instance")[0]["InstanceClass"] == "redis.master.stand.default",
                  "11_mongodb_polardb.tf", "ALIYUN::POLARDB::DBCluster"),
    "rds": ("Create a MySQL 8.0 RDS instance with an account named app", "ALIYUN::RDS::Account",
            "add tag env=prod", lambda t: _props(t, "ALIYUN::RDS::DBInstance")[0]["Tags"] == {"env": "prod"},
            "05_databases.tf", "ALIYUN::RDS::Account"),
    "storage": ("Create a NAS file system and an OSS bucket with versioning", "ALIYUN::NAS::MountTarget",
                "add tag team=data", lambda t: any(tag == {"Key": "team", "Value": "data"}
                                                   for tag in _props(t, "ALIYUN::NAS::FileSystem")[0]["Tags"]),
                "13_nas.tf", "ALIYUN::NAS::FileSystem"),
    "ack": ("Create an ACK managed Kubernetes cluster with 3 nodes", "ALIYUN::CS::ClusterNodePool",
            "use 3 vSwitches", lambda t: len(_props(t, "ALIYUN::CS::ManagedKubernetesCluster")[0]["VSwitchIds"]) == 3,
            "17_ack.tf", "ALIYUN::CS::ManagedKubernetesCluster"),
    "serverless": ("Create a Function Compute function in Python with an HTTP trigger", "ALIYUN::FC::Trigger",
                   "also add a Log Service project",
                   lambda t: "LogConfig" in _props(t, "ALIYUN::FC::Service")[0],
                   "16_function_compute.tf", "ALIYUN::FC::Function"),
    "identity": ("Create a RAM role for ECS instances with read-only access to OSS and a KMS key", "ALIYUN::KMS::Key",
                 "add tag owner=sec", lambda t: _props(t, "ALIYUN::KMS::Key")[0]["Tags"] == [{"Key": "owner", "Value": "sec"}],
                 "15_ram.tf", "ALIYUN::RAM::ManagedPolicy"),
    "logs_dns": ("Create a Log Service project and an A record for www.example.com pointing to 203.0.113.10",
                 "ALIYUN::DNS::DomainRecord", "also add a KMS key", lambda t: _count(t, "ALIYUN::KMS::Key") == 1,
                 "12_dns_records.tf", "ALIYUN::DNS::DomainRecord"),
    "scaling": ("Create an auto scaling group between 2 and 10 instances behind an SLB", "ALIYUN::ESS::ScalingGroupEnable",
                "use 3 vSwitches", lambda t: len(_props(t, "ALIYUN::ESS::ScalingGroup")[0]["VSwitchIds"]) == 3,
                "18_auto_scaling.tf", "ALIYUN::ESS::ScalingConfiguration"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_each_family_generate_edit_review_convert(family: str, tmp_path: Path) -> None:
    prompt, contains, edit, check, tf_file, converts_to = FAMILIES[family]
    (tmp_path / tf_file).write_text((CORPUS / tf_file).read_text())
    async with start_server() as server, aiohttp.ClientSession() as http:
        ctx = f"ctx-{family}"
        first = await turn(http, server, message(prompt, "m1", ctx, tmp_path))
        template = fenced(answer_text(first))
        assert contains in resource_types(template), resource_types(template)
        written = yaml.safe_load((tmp_path / "template.ros.yaml").read_text())
        assert written == template  # the turn asked to write the file, was allowed, wrote what it showed

        second = await turn(http, server, message(edit, "m2", ctx, tmp_path))
        edited = yaml.safe_load((tmp_path / "template.ros.yaml").read_text())
        assert check(edited), resource_types(edited)
        assert contains in resource_types(edited)  # the edit kept the rest
        assert second["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        third = await turn(http, server, message("review template.ros.yaml", "m3", ctx, tmp_path))
        report = json.loads(third["artifacts"][0]["parts"][1]["text"])  # small: inline beside its URL
        assert report["format"] == "ros"
        assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]

        fourth = await turn(http, server, message(f"convert {tf_file} to ROS", "m4", ctx, tmp_path))
        assert converts_to in resource_types(fenced(answer_text(fourth)))


BEYOND_THE_CATALOG = '''
resource "alicloud_vpc" "main" {
  vpc_name   = "search"
  cidr_block = "10.0.0.0/16"
  dry_run    = true
}

resource "alicloud_elasticsearch_instance" "search" {
  data_node_spec = "elasticsearch.sn2ne.large"
  description    = "search"
}

resource "random_password" "pw" {
  length = 16
}
'''


async def test_conversion_names_what_it_did_not_map(tmp_path: Path) -> None:
    """A type outside the catalog converts by the rostran rules; the reply names the type and the argument left out."""
    (tmp_path / "search.tf").write_text(BEYOND_THE_CATALOG)
    async with start_server() as server, aiohttp.ClientSession() as http:
        task = await turn(http, server, message("convert search.tf to ROS", "m1", "ctx-beyond", tmp_path))
        text = answer_text(task)
        converted = fenced(text)
        assert converted["Resources"]["Search"] == {"Type": "ALIYUN::ElasticSearch::Instance", "Properties": {
            "DataNode": {"Spec": "elasticsearch.sn2ne.large"}, "Description": "search"}}
        assert "random_password.pw: resource type not supported" in text
        assert "alicloud_vpc.main.dry_run: no ROS mapping" in text
