"""The offline template review (``iac_code_runtime_offline.engine.review``), driven by ``review_corpus/``."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from iac_code_runtime_offline.engine.review import RULES, Finding, ReviewReport, review

CORPUS = Path(__file__).parent / "review_corpus"
EXPECTATIONS: dict[str, list[str]] = yaml.safe_load((CORPUS / "expectations.yaml").read_text(encoding="utf-8"))
SECRET_MARKER = "Sup3rS3cret"  # every secret value planted in the corpus contains this marker


def _review_file(name: str) -> ReviewReport:
    return review((CORPUS / name).read_text(encoding="utf-8"), name)


def _all_output(report: ReviewReport) -> str:
    return report.to_text() + json.dumps(report.to_json())


def test_every_corpus_file_has_an_expectation() -> None:
    files = {p.name for p in CORPUS.iterdir() if p.name != "expectations.yaml"}
    assert files == set(EXPECTATIONS)


def test_corpus_size_and_rule_coverage() -> None:
    bad = [name for name, ids in EXPECTATIONS.items() if ids]
    clean = [name for name, ids in EXPECTATIONS.items() if not ids]
    assert len(bad) >= 15
    assert len(clean) >= 4
    assert any(n.endswith(".tf") for n in clean) and any(not n.endswith(".tf") for n in clean)
    covered = {rule_id for ids in EXPECTATIONS.values() for rule_id in ids}
    assert covered == set(RULES), "every rule must be exercised by at least one corpus template"
    assert len(RULES) >= 15


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_corpus_expectations(name: str) -> None:
    report = _review_file(name)
    assert {f.rule_id for f in report.findings} == set(EXPECTATIONS[name])


@pytest.mark.parametrize("name", sorted(n for n, ids in EXPECTATIONS.items() if not ids))
def test_clean_templates_have_no_findings(name: str) -> None:
    report = _review_file(name)
    assert report.findings == []
    assert report.to_json()["summary"] == {"errors": 0, "warnings": 0, "infos": 0}
    assert report.to_text().endswith("no findings.")


@pytest.mark.parametrize("name", sorted(n for n in EXPECTATIONS if not n.startswith("broken")))
def test_format_detection(name: str) -> None:
    expected = "terraform" if name.endswith(".tf") else "ros"
    text = (CORPUS / name).read_text(encoding="utf-8")
    assert review(text, name).format == expected
    assert review(text).format == expected  # detection works without a file name too


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_severity_comes_from_rule_table_and_findings_are_sorted(name: str) -> None:
    findings = _review_file(name).findings
    for f in findings:
        assert f.severity == RULES[f.rule_id].severity
    order = {"error": 0, "warning": 1, "info": 2}
    keys = [(order[f.severity], f.location) for f in findings]
    assert keys == sorted(keys)


def test_review_is_deterministic() -> None:
    for name in EXPECTATIONS:
        assert _review_file(name).to_json() == _review_file(name).to_json()


def test_precise_locations() -> None:
    ros = {(f.rule_id, f.location) for f in _review_file("ros_ssh_open.yaml").findings}
    assert ros == {
        ("IAC001", "Resources.WebSg.Properties.SecurityGroupIngress[0]"),
        ("IAC001", "Resources.WebSg.Properties.SecurityGroupIngress[2]"),
    }
    tf = {(f.rule_id, f.location) for f in _review_file("tf_ssh_open.tf").findings}
    assert tf == {("IAC001", "alicloud_security_group_rule.ssh"), ("IAC002", "alicloud_security_group_rule.everything")}
    disks = {f.location for f in _review_file("tf_instance.tf").findings if f.rule_id == "IAC013"}
    assert disks == {"alicloud_instance.web.data_disks[1]"}
    refs = {f.location for f in _review_file("ros_refs.yaml").findings if f.rule_id == "IAC019"}
    assert refs == {"Resources.VSwitch.Properties.ZoneId", "Outputs.RouteTable.Value"}


def test_to_json_shape() -> None:
    report = _review_file("ros_rds_weak.yaml")
    data = report.to_json()
    assert set(data) == {"format", "summary", "findings"}
    assert data["format"] == "ros"
    assert data["summary"] == {"errors": 1, "warnings": 2, "infos": 1}
    assert len(data["findings"]) == 4
    for item, finding in zip(data["findings"], report.findings, strict=True):
        assert set(item) == {"ruleId", "severity", "location", "message", "fix"}
        assert item == {
            "ruleId": finding.rule_id,
            "severity": finding.severity,
            "location": finding.location,
            "message": finding.message,
            "fix": finding.fix,
        }
        assert all(isinstance(v, str) and v for v in item.values())
    json.dumps(data)  # JSON-serialisable


def test_to_text_lists_every_finding() -> None:
    report = _review_file("tf_instance.tf")
    text = report.to_text()
    assert text.splitlines()[0] == "Review of Terraform configuration: 2 errors, 3 warnings, 2 infos."
    for f in report.findings:
        assert f.location in text
        assert f.fix in text
        assert f.message in text
        assert f.rule_id in text


def test_finding_is_frozen() -> None:
    finding = _review_file("ros_oss_public.yaml").findings[0]
    assert isinstance(finding, Finding)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.severity = "info"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "filename"),
    [
        ("", None),
        ("   \n", "main.tf"),
        ("{not json", None),
        ('{"ROSTemplateFormatVersion": "2015-09-01", ', "template.json"),
        ("Resources: [unclosed", "template.yaml"),
        ("just some words", None),
        ("- a\n- b\n", None),
        ('resource "alicloud_vpc" {{{', "main.tf"),
        ("key: value\nother: 2\n", "t.yaml"),
        ("\x00\x01\x02 binary junk", None),
    ],
)
def test_unparseable_input_gives_single_parse_error(text: str, filename: str | None) -> None:
    report = review(text, filename)
    assert report.format == "unknown"
    assert len(report.findings) == 1
    finding = report.findings[0]
    assert (finding.rule_id, finding.severity) == ("IAC000", "error")
    assert RULES["IAC000"].name == "parse_error"
    assert finding.fix


@pytest.mark.parametrize("name", sorted(n for n in EXPECTATIONS if SECRET_MARKER in (CORPUS / n).read_text(encoding="utf-8")))
def test_no_secret_value_is_echoed(name: str) -> None:
    source = (CORPUS / name).read_text(encoding="utf-8")
    secrets = set(re.findall(r"[\w-]*" + SECRET_MARKER + r"[\w-]*", source))
    assert secrets
    output = _all_output(_review_file(name))
    assert SECRET_MARKER not in output
    for secret in secrets:
        assert secret not in output


def test_secret_corpus_files_exist() -> None:
    with_secrets = [n for n in EXPECTATIONS if SECRET_MARKER in (CORPUS / n).read_text(encoding="utf-8")]
    assert len(with_secrets) >= 4


def test_parse_error_does_not_echo_content() -> None:
    secret = "Sup3rS3cret-InBrokenFile"
    report = review(f'resource "alicloud_db_account" "a" {{\n  account_password = "{secret}"\n', "main.tf")
    assert [f.rule_id for f in report.findings] == ["IAC000"]
    assert secret not in _all_output(report)


def test_ros_open_ingress_variants() -> None:
    template = """
ROSTemplateFormatVersion: '2015-09-01'
Resources:
  Sg:
    Type: ALIYUN::ECS::SecurityGroup
    Properties:
      Tags: [{Key: owner, Value: x}]
      SecurityGroupIngress:
        - {IpProtocol: tcp, PortRange: 1/65535, SourceCidrIp: 0.0.0.0/0}
        - {IpProtocol: tcp, PortRange: 20/30, SourceCidrIp: 0.0.0.0/0}
        - {IpProtocol: udp, PortRange: 3389/3389, SourceCidrIp: 10.0.0.0/8}
        - {IpProtocol: icmp, PortRange: -1/-1, SourceCidrIp: 0.0.0.0/0}
"""
    found = {(f.rule_id, f.location) for f in review(template).findings}
    assert found == {
        ("IAC002", "Resources.Sg.Properties.SecurityGroupIngress[0]"),
        ("IAC001", "Resources.Sg.Properties.SecurityGroupIngress[1]"),
    }


def test_terraform_provider_pinning_variants() -> None:
    base = (
        'provider "alicloud" {{\n  region = "cn-hangzhou"\n}}\n'
        "terraform {{\n  required_providers {{\n    alicloud = {{\n{v}    }}\n  }}\n}}\n"
    )
    pinned = ['      version = "~> 1.230"\n', '      version = "1.230.0"\n', '      version = ">= 1.2, < 2.0"\n']
    unpinned = ['      version = ">= 1.2"\n', '      source = "aliyun/alicloud"\n']
    for version in pinned:
        assert review(base.format(v=version), "main.tf").findings == [], version
    for version in unpinned:
        assert [f.rule_id for f in review(base.format(v=version), "main.tf").findings] == ["IAC016"], version


def test_non_literal_password_is_not_flagged() -> None:
    template = """
ROSTemplateFormatVersion: '2015-09-01'
Parameters:
  Pass:
    Type: String
    NoEcho: true
Resources:
  Cache:
    Type: ALIYUN::REDIS::Instance
    Properties:
      Tags: [{Key: owner, Value: x}]
      Password:
        Fn::Join: ['', [{Ref: Pass}, suffix]]
"""
    assert review(template).findings == []


def test_absurdly_nested_input_does_not_raise() -> None:
    report = review("[" * 100_000 + "]" * 100_000)
    assert [f.rule_id for f in report.findings] == ["IAC000"]
