"""Terraform → ROS conversion over a corpus of alicloud configurations.

Every corpus file must convert to a structurally sane ROS template, and the
per-file tests pin the ROS types, property names, references and the honest
list of what was not converted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from iac_code_runtime_offline.engine.catalog import ROS_TEMPLATE_VERSION, ROS_TYPES, TERRAFORM_TO_ROS
from iac_code_runtime_offline.engine.ros_schema import validate_ros
from iac_code_runtime_offline.engine.rostran_rules import ros_rule
from iac_code_runtime_offline.engine.terraform_to_ros import ConversionResult, convert

CORPUS = Path(__file__).parent / "conversion_corpus"
FILES = sorted(CORPUS.glob("*.tf"))


def _load(name: str) -> ConversionResult:
    return convert((CORPUS / name).read_text(encoding="utf-8"))


def _intrinsics(value: Any, key: str) -> Iterator[Any]:
    """Every argument of the intrinsic ``key`` anywhere under ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            yield from _intrinsics(v, key)
    elif isinstance(value, list):
        for v in value:
            yield from _intrinsics(v, key)


def _assert_sane(template: dict[str, Any]) -> None:
    """ROS version, known resource types, and every Ref / GetAtt / DependsOn resolving inside the template."""
    assert template["ROSTemplateFormatVersion"] == ROS_TEMPLATE_VERSION == "2015-09-01"
    resources = template["Resources"]
    parameters = template.get("Parameters", {})
    assert not set(resources) & set(parameters), "parameters and resources share one namespace"
    for name, resource in resources.items():
        assert name.isalnum() and name[0].isalpha(), name
        assert resource["Type"] in ROS_TYPES or ros_rule(resource["Type"]) is not None
        assert isinstance(resource["Properties"], dict)
        for target in resource.get("DependsOn", []):
            assert target in resources
    for ref in _intrinsics(template, "Ref"):
        assert ref in parameters or ref in resources or str(ref).startswith("ALIYUN::"), ref
    for get_att in _intrinsics(template, "Fn::GetAtt"):
        assert isinstance(get_att, list) and len(get_att) == 2 and get_att[0] in resources, get_att
    for param in parameters.values():
        assert param["Type"] in {"String", "Number", "Boolean", "CommaDelimitedList", "Json"}


def test_corpus_is_big_enough_and_covers_every_supported_type() -> None:
    assert len(FILES) >= 8
    converted_types = {address.split(".")[0] for f in FILES for address in convert(f.read_text()).converted}
    assert set(TERRAFORM_TO_ROS) <= converted_types


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_every_corpus_file_converts_to_a_sane_template(path: Path) -> None:
    result = convert(path.read_text(encoding="utf-8"))
    _assert_sane(result.template)
    assert yaml.safe_load(result.text) == result.template
    assert result.converted, "each corpus file converts something"
    for line in result.unconverted:
        assert ": " in line and line.split(": ", 1)[1], "every unconverted entry carries a reason"
    assert validate_ros(result.template) == []


def test_vpc_network() -> None:
    result = _load("01_vpc_network.tf")
    res = result.template["Resources"]
    assert res["Main"] == {"Type": "ALIYUN::ECS::VPC", "Properties": {
        "VpcName": "demo-vpc", "CidrBlock": "172.16.0.0/12", "Tags": [{"Key": "env", "Value": "dev"}]}}
    assert res["WebA"]["Type"] == "ALIYUN::ECS::VSwitch"
    assert res["WebA"]["Properties"] == {"VpcId": {"Ref": "Main"}, "CidrBlock": "172.16.1.0/24", "ZoneId": "cn-hangzhou-i",
                                         "VSwitchName": "web-a"}
    assert res["Web"] == {"Type": "ALIYUN::ECS::SecurityGroup",
                          "Properties": {"SecurityGroupName": "web-sg", "VpcId": {"Ref": "Main"}}}
    assert res["Ssh"]["Type"] == "ALIYUN::ECS::SecurityGroupIngress"
    assert res["Ssh"]["Properties"] == {"IpProtocol": "tcp", "NicType": "intranet", "Policy": "accept", "PortRange": "22/22",
                                        "Priority": 1, "SecurityGroupId": {"Ref": "Web"}, "SourceCidrIp": "10.0.0.0/8"}
    assert "alicloud_security_group_rule.all_out: only ingress security group rules are supported" in result.unconverted
    assert result.template["Outputs"] == {
        "VpcId": {"Value": {"Ref": "Main"}, "Description": "The VPC"},
        "RouteTable": {"Value": {"Fn::GetAtt": ["Main", "RouteTableId"]}},
    }
    assert result.converted == ["alicloud_vpc.main", "alicloud_vswitch.web_a", "alicloud_security_group.web",
                                "alicloud_security_group_rule.ssh", "output.vpc_id", "output.route_table"]


def test_ecs_instance_and_variables() -> None:
    result = _load("02_ecs_instance.tf")
    params = result.template["Parameters"]
    assert params["InstanceType"] == {"Type": "String", "Default": "ecs.g7.large", "Description": "ECS instance type"}
    assert params["DiskSize"] == {"Type": "Number", "Default": 40}
    assert params["Public"] == {"Type": "Boolean", "Default": True}
    assert params["Zones"] == {"Type": "CommaDelimitedList", "Default": "cn-hangzhou-i,cn-hangzhou-j"}
    assert params["DbPassword"] == {"Type": "String", "NoEcho": True}
    web = result.template["Resources"]["WebServer"]
    assert web["Type"] == "ALIYUN::ECS::Instance"
    assert web["Properties"] == {
        "InstanceName": "web",
        "ImageId": "aliyun_3_x64_20G_alibase_20240528.vhd",
        "InstanceType": {"Ref": "InstanceType"},
        "VSwitchId": {"Ref": "Vsw"},
        "SecurityGroupId": {"Ref": "Sg"},
        "SystemDiskCategory": "cloud_essd",
        "SystemDiskSize": {"Ref": "DiskSize"},
        "InternetMaxBandwidthOut": 10,
        "Password": "Hard-Coded-Passw0rd",
        "Tags": [{"Key": "app", "Value": "web"}],
        "VpcId": {"Ref": "Vpc"},  # derived from the vswitch's vpc
    }
    worker = result.template["Resources"]["Worker"]["Properties"]
    assert worker["Password"] == {"Ref": "DbPassword"}
    assert any("web_server.password" in w and "hard-coded" in w for w in result.warnings)
    assert not any("worker.password" in w for w in result.warnings)
    assert any("only the first of 2 security groups" in w for w in result.warnings)
    assert result.template["Outputs"]["WebPublicIp"] == {"Value": {"Fn::GetAtt": ["WebServer", "PublicIp"]}}


def test_nat_eip_snat() -> None:
    result = _load("03_nat_eip_snat.tf")
    res = result.template["Resources"]
    assert res["Nat"] == {"Type": "ALIYUN::VPC::NatGateway", "Properties": {
        "VpcId": {"Ref": "Vpc"}, "VSwitchId": {"Ref": "Vsw"}, "NatType": "Enhanced", "NatGatewayName": "demo-nat"}}
    assert res["Eip"] == {"Type": "ALIYUN::VPC::EIP", "Properties": {
        "Name": "nat-eip", "Bandwidth": 10, "InternetChargeType": "PayByTraffic", "InstanceChargeType": "PostPaid",
        "Isp": "BGP"}}
    assert res["NatEip"] == {"Type": "ALIYUN::VPC::EIPAssociation",
                             "Properties": {"AllocationId": {"Ref": "Eip"}, "InstanceId": {"Ref": "Nat"}}}
    assert res["Snat"] == {"Type": "ALIYUN::VPC::SnatEntry", "Properties": {
        "SnatTableId": {"Fn::GetAtt": ["Nat", "SNatTableId"]},
        "SourceVSwitchIds": [{"Ref": "Vsw"}],
        "SnatIp": {"Fn::GetAtt": ["Eip", "EipAddress"]},
    }}
    assert res["Legacy"] == {"Type": "ALIYUN::VPC::EIP", "Properties": {"Bandwidth": 5, "InternetChargeType": "PayByBandwidth"}}
    assert "alicloud_eip.legacy" in result.converted
    assert any("deprecated type alicloud_eip" in w for w in result.warnings)
    assert result.template["Outputs"]["EipAddress"] == {"Value": {"Fn::GetAtt": ["Eip", "EipAddress"]}}
    assert result.unconverted == []


def test_load_balancers() -> None:
    result = _load("04_load_balancers.tf")
    res = result.template["Resources"]
    assert res["Slb"] == {"Type": "ALIYUN::SLB::LoadBalancer", "Properties": {
        "LoadBalancerName": "classic", "AddressType": "intranet", "LoadBalancerSpec": "slb.s2.small",
        "VSwitchId": {"Ref": "A"}, "InternetChargeType": "paybytraffic", "VpcId": {"Ref": "Vpc"}}}
    assert result.lossless  # payment_type = "PayAsYouGo" is what ROS creates anyway
    alb = res["Alb"]
    assert alb["Type"] == "ALIYUN::ALB::LoadBalancer"
    assert alb["Properties"]["LoadBalancerBillingConfig"] == {"PayType": "PayAsYouGo"}
    assert alb["Properties"]["ZoneMappings"] == [
        {"ZoneId": {"Fn::GetAtt": ["A", "ZoneId"]}, "VSwitchId": {"Ref": "A"}},
        {"ZoneId": "cn-beijing-i", "VSwitchId": {"Ref": "B"}},
    ]
    assert alb["Properties"]["VpcId"] == {"Ref": "Vpc"}
    assert alb["Properties"]["LoadBalancerEdition"] == "Standard"
    outputs = result.template["Outputs"]
    assert outputs["SlbAddress"]["Value"] == {"Fn::GetAtt": ["Slb", "IpAddress"]}
    assert outputs["AlbDns"]["Value"] == {"Fn::GetAtt": ["Alb", "DNSName"]}


def test_load_balancer_listeners_and_backends() -> None:
    result = _load("09_lb_listeners_backends.tf")
    res = result.template["Resources"]
    assert result.unconverted == [] and result.warnings == []
    assert res["Tcp"]["Properties"] == {"LoadBalancerId": {"Ref": "Slb"}, "ListenerPort": 443, "BackendServerPort": 443,
                                        "Protocol": "tcp", "Bandwidth": -1}
    assert res["Web"] == {"Type": "ALIYUN::SLB::BackendServerAttachment", "Properties": {
        "LoadBalancerId": {"Ref": "Slb"},
        "BackendServers": [{"ServerId": {"Ref": "Web1"}, "Weight": 100}, {"ServerId": {"Ref": "Web2"}, "Weight": 50}]}}
    assert res["WebServerGroup"]["Properties"]["HealthCheckConfig"] == {"HealthCheckEnabled": True, "HealthCheckPath": "/health"}
    assert res["HttpListener"]["Properties"]["DefaultActions"] == [
        {"Type": "ForwardGroup", "ForwardGroupConfig": {"ServerGroupTuples": [{"ServerGroupId": {"Ref": "WebServerGroup"}}]}}]
    assert res["Web1BackendServerAttachment"]["Properties"] == {"ServerGroupId": {"Ref": "WebServerGroup"}, "Servers": [
        {"ServerId": {"Ref": "Web1"}, "ServerType": "Ecs", "Port": 80, "Weight": 100}]}


@pytest.mark.parametrize("prompt", [
    "Terraform for an SLB in zone cn-hangzhou-h with port 443 open",
    "Terraform for an ALB with vSwitches in zones cn-hangzhou-h and cn-hangzhou-i",
])
def test_generated_load_balancer_terraform_converts_back(prompt: str) -> None:
    from iac_code_runtime_offline.engine.generation import generate

    result = convert(generate(prompt).text)
    assert result.unconverted == [] and not [w for w in result.warnings if w.startswith("alicloud_")]
    assert validate_ros(result.template) == []
    types = {resource["Type"] for resource in result.template["Resources"].values()}
    expected = ({"ALIYUN::SLB::LoadBalancer", "ALIYUN::SLB::Listener"} if "SLB" in prompt
                else {"ALIYUN::ALB::LoadBalancer", "ALIYUN::ALB::ServerGroup", "ALIYUN::ALB::Listener"})
    assert expected <= types
    ports = sorted(r["Properties"].get("ListenerPort") for r in result.template["Resources"].values() if "Listener" in r["Type"])
    assert ports == ([80, 443] if "SLB" in prompt else [80])


def test_databases() -> None:
    result = _load("05_databases.tf")
    res = result.template["Resources"]
    assert res["Mysql"] == {"Type": "ALIYUN::RDS::DBInstance", "Properties": {
        "Engine": "MySQL", "EngineVersion": "8.0", "DBInstanceClass": "mysql.n2.medium.1", "DBInstanceStorage": 50,
        "DBInstanceStorageType": "cloud_essd", "VSwitchId": {"Ref": "Db"}, "SecurityIPList": "10.2.0.0/16,192.168.0.1",
        "DBInstanceDescription": "orders", "VpcId": {"Ref": "Vpc"}}}
    assert res["Cache"] == {"Type": "ALIYUN::REDIS::Instance", "Properties": {
        "InstanceName": "cache", "InstanceClass": "redis.master.small.default", "EngineVersion": "7.0",
        "VSwitchId": {"Ref": "Db"}, "ZoneId": "cn-hangzhou-j", "Password": {"Ref": "RedisPassword"}, "VpcId": {"Ref": "Vpc"}}}
    assert result.template["Parameters"]["RedisPassword"] == {"Type": "String", "NoEcho": True}
    assert res["App"] == {"Type": "ALIYUN::RDS::Account", "Properties": {
        "DBInstanceId": {"Ref": "Mysql"}, "AccountName": "app", "AccountPassword": {"Ref": "AppPassword"},
        "AccountType": "Normal"}}
    assert result.template["Parameters"]["AppPassword"] == {"Type": "String", "NoEcho": True}
    assert "alicloud_kvstore_instance.cache: property security_ips was not converted (no ROS mapping)" in result.warnings
    outputs = result.template["Outputs"]
    assert outputs["MysqlConnection"]["Value"] == {"Fn::GetAtt": ["Mysql", "InnerConnectionString"]}
    assert outputs["RedisHost"]["Value"] == {"Fn::GetAtt": ["Cache", "ConnectionDomain"]}


def test_oss_bucket_and_interpolation() -> None:
    result = _load("06_oss_bucket.tf")
    assert result.template["Parameters"] == {"Prefix": {"Type": "String", "Default": "acme"}}
    assert result.template["Resources"]["Logs"] == {"Type": "ALIYUN::OSS::Bucket", "Properties": {
        "BucketName": {"Fn::Join": ["", [{"Ref": "Prefix"}, "-logs"]]},
        "AccessControl": "private",
        "StorageClass": "Standard",
        "Tags": {"team": "platform", "cost": "shared"},
    }}
    outputs = result.template["Outputs"]
    assert outputs["BucketName"]["Value"] == {"Ref": "Logs"}
    assert outputs["BucketUrl"]["Value"] == {"Fn::Join": ["", ["oss://", {"Fn::GetAtt": ["Logs", "Name"]}, "/"]]}
    assert result.unconverted == ["output.bucket_endpoint: attribute alicloud_oss_bucket.logs.extranet_endpoint has no ROS "
                                  "equivalent"]


def test_unsupported_things_are_reported_not_dropped() -> None:
    result = _load("07_unsupported.tf")
    assert set(result.template["Resources"]) == {"Main", "FromData", "Sg"}
    assert result.unconverted == [
        "data.alicloud_zones.default: data sources are not supported",
        "module.network: modules are not supported",
        "alicloud_milvus_instance.vectors: resource type not supported",
        "alicloud_instance.many: count meta-argument not supported",
        "alicloud_oss_bucket.each: for_each meta-argument not supported",
        "random_password.pw: resource type not supported",
        "output.k8s_id: referenced resource alicloud_milvus_instance.vectors is not converted",
        "output.module_out: expression `module.network.vpc_id` cannot be mapped to ROS",
    ]
    warnings = "\n".join(result.warnings)
    assert "provider.alicloud:" in warnings and "terraform:" in warnings
    assert "alicloud_vswitch.from_data: property vswitch_name was not converted" in warnings
    assert "alicloud_security_group.sg: property name was not converted" in warnings
    assert "alicloud_security_group.sg: property inner_access_policy was not converted (no ROS mapping)" in warnings
    assert "alicloud_security_group.sg: provisioner was not converted" in warnings
    assert "VSwitchName" not in result.template["Resources"]["FromData"]["Properties"]


def test_references_collisions_locals_and_depends_on() -> None:
    result = _load("08_references.tf")
    res = result.template["Resources"]
    # three resources all named "main": unique logical ids, disambiguated by ROS type
    assert [k for k in res] == ["Main", "MainVSwitch", "MainSecurityGroup", "App"]
    assert res["Main"]["Properties"] == {"VpcName": "ref-vpc", "CidrBlock": "10.9.0.0/16"}  # locals inlined and folded
    assert res["MainSecurityGroup"]["DependsOn"] == ["MainVSwitch"]
    app = res["App"]
    assert app["DependsOn"] == ["MainSecurityGroup"]
    assert app["Properties"]["SecurityGroupId"] == {"Ref": "MainSecurityGroup"}
    assert app["Properties"]["VpcId"] == {"Ref": "Main"}
    assert app["Properties"]["InstanceName"] == {"Fn::Join": ["", ["ref-app-", {"Fn::GetAtt": ["MainVSwitch", "ZoneId"]}]]}
    assert "alicloud_instance.app: depends_on alicloud_cs_cluster.missing was not converted" in result.warnings
    assert any(w.startswith("local.cidr:") for w in result.warnings)
    assert result.template["Outputs"]["AppPrivateIp"]["Value"] == {"Fn::GetAtt": ["App", "PrivateIp"]}


@pytest.mark.parametrize("text", ["resource {{{", 'resource "alicloud_vpc" "x" {', "\x00\x01", "= = ="])
def test_invalid_hcl_never_raises(text: str) -> None:
    result = convert(text)
    assert result.template == {}
    assert result.unconverted == ["<input>: not valid HCL"]
    assert result.converted == []


def test_empty_input_gives_an_empty_template() -> None:
    result = convert("")
    assert result.template == {"ROSTemplateFormatVersion": "2015-09-01", "Resources": {}}
    assert result.converted == [] and result.unconverted == []


def test_result_is_frozen() -> None:
    result = convert("")
    with pytest.raises(AttributeError):
        result.text = "x"  # type: ignore[misc]


def test_expressions_that_cannot_be_mapped() -> None:
    hcl = '''
variable "n" { default = 1 }
resource "alicloud_vpc" "v" {
  cidr_block  = cidrsubnet("10.0.0.0/8", 8, 1)
  vpc_name    = "a-%{ if var.n > 0 }x%{ endif }"
  description = var.undeclared
}
resource "alicloud_vswitch" "s" {
  vpc_id     = alicloud_vpc.v.router_id
  zone_id    = alicloud_vpc.v.no_such_attribute
  cidr_block = "10.1.0.0/24"
}
'''
    result = convert(hcl)
    _assert_sane(result.template)
    assert result.template["Resources"]["V"]["Properties"] == {}
    assert result.template["Resources"]["S"]["Properties"] == {"VpcId": {"Fn::GetAtt": ["V", "VRouterId"]},
                                                               "CidrBlock": "10.1.0.0/24"}
    text = "\n".join(result.warnings)
    assert "alicloud_vpc.v: property cidr_block was not converted" in text
    assert "template directives" in text
    assert "undeclared variable var.undeclared" in text
    assert "attribute alicloud_vpc.v.no_such_attribute has no ROS equivalent" in text


def test_security_ips_with_references_use_join() -> None:
    hcl = '''
variable "office" { type = string }
resource "alicloud_db_instance" "db" {
  engine           = "MySQL"
  engine_version   = "8.0"
  instance_type    = "mysql.n2.medium.1"
  instance_storage = "20"
  security_ips     = ["10.0.0.0/8", var.office]
}
'''
    props = convert(hcl).template["Resources"]["Db"]["Properties"]
    assert props["SecurityIPList"] == {"Fn::Join": [",", ["10.0.0.0/8", {"Ref": "Office"}]]}
    assert props["DBInstanceStorage"] == 20


def test_heredoc_escapes_and_tag_values() -> None:
    hcl = '''
variable "greeting" { default = "hello" }
resource "alicloud_instance" "i" {
  image_id      = "img"
  instance_type = "ecs.g7.large"
  description   = "say \\"hi\\" $${literal}"
  user_data     = <<-EOT
    #!/bin/bash
    echo ${var.greeting}
  EOT
  tags = { "Name" = "x", size = 2, on = true }
}
'''
    props = convert(hcl).template["Resources"]["I"]["Properties"]
    assert props["Description"] == 'say "hi" ${literal}'
    assert props["UserData"] == {"Fn::Join": ["", ["#!/bin/bash\necho ", {"Ref": "Greeting"}, "\n"]]}
    assert props["Tags"] == [{"Key": "Name", "Value": "x"}, {"Key": "size", "Value": "2"}, {"Key": "on", "Value": "true"}]


def test_oss_versioning_encryption_and_lifecycle_convert() -> None:
    result = convert('''
resource "alicloud_oss_bucket" "archive" {
  bucket = "archive-2026"
  versioning {
    status = "Enabled"
  }
  server_side_encryption_rule {
    sse_algorithm = "KMS"
  }
  lifecycle_rule {
    id      = "old"
    prefix  = "logs/"
    enabled = true
    expiration {
      days = 30
    }
  }
}
''')
    assert result.template["Resources"]["Archive"]["Properties"] == {
        "BucketName": "archive-2026", "VersioningConfiguration": {"Status": "Enabled"},
        "ServerSideEncryptionConfiguration": {"SSEAlgorithm": "KMS"},
        "LifecycleConfiguration": {"Rule": [{"ID": "old", "Prefix": "logs/", "Status": "Enabled",
                                             "Expiration": {"Days": 30}}]}}
    assert validate_ros(result.template) == []


def test_kms_key_and_log_service() -> None:
    result = _load("10_kms_and_logs.tf")
    res = result.template["Resources"]
    assert res["Data"] == {"Type": "ALIYUN::KMS::Key", "Properties": {
        "Description": "data key", "KeyUsage": "ENCRYPT/DECRYPT", "EnableAutomaticRotation": True,
        "RotationInterval": "180d", "PendingWindowInDays": 7}}
    assert res["Events"]["Properties"] == {"ProjectName": {"Fn::GetAtt": ["Audit", "Name"]}, "LogstoreName": "events",
                                           "TTL": 180, "ShardCount": 2}
    assert result.template["Outputs"]["KeyArn"]["Value"] == {"Fn::GetAtt": ["Data", "Arn"]}


def test_mongodb_and_polardb() -> None:
    result = _load("11_mongodb_polardb.tf")
    res = result.template["Resources"]
    assert res["Docs"] == {"Type": "ALIYUN::MONGODB::Instance", "Properties": {
        "EngineVersion": "6.0", "DBInstanceClass": "dds.mongo.mid", "DBInstanceStorage": 40, "VSwitchId": {"Ref": "Data"},
        "SecurityIPArray": "10.8.0.0/16", "AccountPassword": {"Ref": "MongoPassword"}, "DBInstanceDescription": "docs",
        "VpcId": {"Ref": "Vpc"}}}
    assert res["Orders"]["Properties"]["PayType"] == "Postpaid" and res["Orders"]["Properties"]["VpcId"] == {"Ref": "Vpc"}
    assert result.template["Parameters"]["MongoPassword"] == {"Type": "String", "NoEcho": True}
    assert result.template["Outputs"]["OrdersEndpoint"]["Value"] == {"Fn::GetAtt": ["Orders", "ClusterConnectionString"]}


def test_nas_file_system_and_mount_target() -> None:
    result = _load("13_nas.tf")
    res = result.template["Resources"]
    assert res["Share"]["Properties"] == {"ProtocolType": "NFS", "StorageType": "Performance", "EncryptType": 1,
                                          "Description": "share"}
    assert res["ShareMountTarget"]["Properties"]["FileSystemId"] == {"Ref": "Share"}
    assert res["ShareMountTarget"]["Properties"]["NetworkType"] == "Vpc"
    assert result.template["Outputs"]["MountDomain"]["Value"] == {"Fn::GetAtt": ["ShareMountTarget", "MountTargetDomain"]}


def test_nlb_listener_server_group_and_attachment() -> None:
    result = _load("14_nlb.tf")
    res = result.template["Resources"]
    assert res["Nlb"]["Properties"]["AddressIpVersion"] == "ipv4"
    assert res["Nlb"]["Properties"]["ZoneMappings"] == [
        {"ZoneId": {"Fn::GetAtt": ["A", "ZoneId"]}, "VSwitchId": {"Ref": "A"}},
        {"ZoneId": {"Fn::GetAtt": ["B", "ZoneId"]}, "VSwitchId": {"Ref": "B"}}]
    assert res["Tcp"]["Properties"]["HealthCheckConfig"] == {"HealthCheckEnabled": True}
    assert res["Tcp80"]["Properties"] == {"ListenerProtocol": "TCP", "ListenerPort": 80, "LoadBalancerId": {"Ref": "Nlb"},
                                          "ServerGroupId": {"Ref": "Tcp"}}
    assert res["Web"]["Properties"] == {"ServerGroupId": {"Ref": "Tcp"}, "Servers": [
        {"ServerId": "i-bp1example", "ServerType": "Ecs", "Port": 80, "Weight": 100}]}
    assert result.template["Outputs"]["NlbDns"]["Value"] == {"Fn::GetAtt": ["Nlb", "DNSName"]}


def test_ram_role_and_policy_documents() -> None:
    result = _load("15_ram.tf")
    res = result.template["Resources"]
    assert res["Reader"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": ["ecs.aliyuncs.com"]}
    assert res["Reports"]["Properties"]["PolicyDocument"]["Statement"][0]["Action"] == ["oss:GetObject"]
    assert result.template["Outputs"]["RoleArn"]["Value"] == {"Fn::GetAtt": ["Reader", "Arn"]}
    wrapped = convert('resource "alicloud_ram_policy" "p" {\n  policy_name = "p"\n  policy_document = jsonencode({a = 1})\n}\n')
    assert any("policy_document was not converted" in w for w in wrapped.warnings)  # said, not silently dropped


def test_function_compute() -> None:
    result = _load("16_function_compute.tf")
    res = result.template["Resources"]
    assert res["Hello"]["Properties"] == {
        "ServiceName": {"Fn::GetAtt": ["Api", "ServiceName"]}, "FunctionName": "hello", "Runtime": "python3.10",
        "Handler": "index.handler", "MemorySize": 256, "Timeout": 30,
        "Code": {"OssBucketName": "code-bucket", "OssObjectName": "hello.zip"}}
    assert res["Http"]["Properties"]["TriggerConfig"] == {"AuthType": "function", "Methods": ["GET"]}
    assert res["Http"]["Properties"]["FunctionName"] == {"Fn::GetAtt": ["Hello", "FunctionName"]}


def test_ack_cluster_and_node_pool() -> None:
    result = _load("17_ack.tf")
    res = result.template["Resources"]
    assert res["K8s"]["Properties"]["VSwitchIds"] == [{"Ref": "A"}, {"Ref": "B"}]
    assert res["K8s"]["Properties"]["EndpointPublicAccess"] is False
    assert res["Workers"]["Properties"] == {
        "ClusterId": {"Ref": "K8s"}, "NodePoolInfo": {"Name": "workers"},
        "ScalingGroup": {"VSwitchIds": [{"Ref": "A"}, {"Ref": "B"}], "InstanceTypes": ["ecs.g7.xlarge"], "DesiredSize": 3}}


def test_auto_scaling_group_and_configuration() -> None:
    result = _load("18_auto_scaling.tf")
    res = result.template["Resources"]
    assert res["WebScalingGroup"]["Properties"] == {"ScalingGroupName": "web", "MinSize": 2, "MaxSize": 8,
                                                    "VSwitchIds": [{"Ref": "A"}]}
    assert res["WebScalingConfiguration"]["Properties"]["ScalingGroupId"] == {"Ref": "WebScalingGroup"}
    assert "Active" not in res["WebScalingConfiguration"]["Properties"]  # ROS enables a group with a resource of its own
    assert res["WebScalingConfigurationEnable"] == {"Type": "ALIYUN::ESS::ScalingGroupEnable", "Properties": {
        "ScalingGroupId": {"Ref": "WebScalingGroup"}, "ScalingConfigurationId": {"Ref": "WebScalingConfiguration"}}}


def test_every_type_the_rules_map_converts() -> None:
    """Each of the ~810 Terraform types the rostran rules map converts to its ROS type (catalog types by their tables)."""
    from iac_code_runtime_offline.engine.rostran_rules import terraform_rule, terraform_types

    types = sorted(terraform_types())
    assert len(types) >= 800
    for tf_type in types:
        result = convert(f'resource "{tf_type}" "x" {{\n}}\n')
        assert result.converted == [f"{tf_type}.x"] and result.unconverted == [], tf_type
        rule = terraform_rule(tf_type)
        expected = TERRAFORM_TO_ROS.get(tf_type) or (rule.ros_type if rule else None)
        if tf_type in ("alicloud_eip", "alicloud_slb", "alicloud_db_account", "alicloud_dns_record"):
            continue  # deprecated names: converted as their catalog successors (see test_nat_eip_snat)
        assert result.template["Resources"]["X"]["Type"] == expected, tf_type


def test_types_beyond_the_catalog_convert_by_the_rules() -> None:
    result = convert('''
variable "es_password" {
  sensitive = true
}
resource "alicloud_vpc" "vpc" {
  cidr_block = "10.0.0.0/16"
}
resource "alicloud_vswitch" "vsw" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.0.1.0/24"
  zone_id    = "cn-hangzhou-i"
}
resource "alicloud_elasticsearch_instance" "search" {
  data_node_amount = 2
  data_node_spec   = "elasticsearch.sn2ne.large"
  vswitch_id       = alicloud_vswitch.vsw.id
  password         = var.es_password
  kibana_whitelist = ["10.0.0.0/8"]
  tags             = { env = "dev" }
}
resource "alicloud_ecs_key_pair" "kp" {
  key_pair_name = "demo"
  public_key    = "ssh-rsa AAAA"
}
resource "alicloud_instance" "web" {
  image_id      = "img"
  instance_type = "ecs.g7.large"
  vswitch_id    = alicloud_vswitch.vsw.id
  key_name      = alicloud_ecs_key_pair.kp.key_pair_name
  data_disks {
    size      = 100
    category  = "cloud_essd"
    encrypted = true
  }
}
resource "alicloud_route_entry" "default" {
  route_table_id        = alicloud_vpc.vpc.route_table_id
  destination_cidrblock = "0.0.0.0/0"
  nexthop_type          = "Instance"
  nexthop_id            = alicloud_instance.web.id
  no_such_argument      = 1
}
output "es_domain" {
  value = alicloud_elasticsearch_instance.search.domain
}
output "key_fingerprint" {
  value = alicloud_ecs_key_pair.kp.finger_print
}
output "key_created" {
  value = alicloud_ecs_key_pair.kp.create_time
}
''')
    res = result.template["Resources"]
    assert res["Search"] == {"Type": "ALIYUN::ElasticSearch::Instance", "Properties": {
        "DataNode": {"Amount": 2, "Spec": "elasticsearch.sn2ne.large"}, "VSwitchId": {"Ref": "Vsw"},
        "Password": {"Ref": "EsPassword"}, "KibanaWhitelist": ["10.0.0.0/8"], "Tags": [{"Key": "env", "Value": "dev"}]}}
    assert res["Kp"] == {"Type": "ALIYUN::ECS::SSHKeyPair", "Properties": {"KeyPairName": "demo",
                                                                          "PublicKeyBody": "ssh-rsa AAAA"}}
    web = res["Web"]["Properties"]  # a catalog type: its table first, then what the rules map
    assert web["KeyPairName"] == {"Fn::GetAtt": ["Kp", "KeyPairName"]}
    assert web["DiskMappings"] == [{"Size": 100, "Category": "cloud_essd"}]
    assert res["Default"] == {"Type": "ALIYUN::ECS::Route", "Properties": {
        "RouteTableId": {"Fn::GetAtt": ["Vpc", "RouteTableId"]}, "DestinationCidrBlock": "0.0.0.0/0",
        "NextHopType": "Instance", "NextHopId": {"Ref": "Web"}}}
    assert result.template["Outputs"] == {"EsDomain": {"Value": {"Fn::GetAtt": ["Search", "Domain"]}},
                                          "KeyFingerprint": {"Value": {"Fn::GetAtt": ["Kp", "KeyPairFingerPrint"]}}}
    assert result.unconverted == ["output.key_created: attribute alicloud_ecs_key_pair.kp.create_time has no ROS "
                                  "equivalent"]
    assert result.unmapped_properties == ["alicloud_instance.web.data_disks.encrypted: no ROS mapping",
                                          "alicloud_route_entry.default.no_such_argument: no ROS mapping"]
    assert "alicloud_instance.web: property data_disks.encrypted was not converted (no ROS mapping)" in result.warnings
    assert not result.lossless and result.unmapped_types == []
    assert validate_ros(result.template) == []


def test_the_rules_value_transforms() -> None:
    result = convert('''
resource "alicloud_polardb_account_privilege" "p" {
  db_cluster_id = "pc-1"
  account_name  = "app"
  db_names      = ["a", "b"]
}
resource "alicloud_ros_stack_instance" "s" {
  stack_group_name          = "g"
  stack_instance_account_id = "123"
  stack_instance_region_id  = "cn-hangzhou"
  operation_preferences     = "{\\"FailureToleranceCount\\": 1}"
  parameter_overrides {
    parameter_key   = "Name"
    parameter_value = "demo"
  }
}
resource "alicloud_ddoscoo_instance" "d" {
  bandwidth = "30"
}
resource "alicloud_slb_listener" "l" {
  load_balancer_id = "lb-1"
  frontend_port    = 80
  protocol         = "http"
  x_forwarded_for {
    retrive_slb_ip = true
  }
}
''')
    res = result.template["Resources"]
    assert res["P"]["Properties"] == {"DBClusterId": "pc-1", "AccountName": "app", "DBName": "a"}  # select_first
    assert res["S"]["Properties"] == {"StackGroupName": "g", "AccountIds": ["123"], "RegionIds": ["cn-hangzhou"],
                                      "OperationPreferences": {"FailureToleranceCount": 1},  # json_load
                                      "ParameterOverrides": {"Name": "demo"}}  # ros_parameters
    assert res["D"]["Properties"] == {"Bandwidth": 30}  # to_int
    assert "XForwardedFor" not in res["L"]["Properties"]
    assert result.unmapped_properties == [
        "alicloud_polardb_account_privilege.p.db_names: only the first of 2 values",
        "alicloud_slb_listener.l.x_forwarded_for: the rules convert it with slb_x_forwarded_for, which is not available "
        "offline"]
