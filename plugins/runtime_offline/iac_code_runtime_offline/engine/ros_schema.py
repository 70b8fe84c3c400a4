"""A small, plain-Python schema of the ROS resource types the engine supports, and a validator.

Types outside the catalog (a conversion maps every type Alibaba Cloud's rostran rules know) are checked
against those rules' property and attribute names (:mod:`.rostran_rules`); their values are not typed.

Why plain Python instead of jsonschema: the checks we need (unknown types, required/unknown
properties, dangling ``Ref``/``Fn::GetAtt``) are cross-references a JSON schema cannot express,
and it keeps the engine free of an extra dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iac_code_runtime_offline.engine.catalog import ROS_TYPES
from iac_code_runtime_offline.engine.rostran_rules import ros_rule

TOP_LEVEL_KEYS = frozenset({
    "ROSTemplateFormatVersion", "Description", "Metadata", "Parameters", "Mappings", "Conditions", "Rules",
    "Resources", "Outputs", "Locals", "Workspace", "Transform",
})
PARAMETER_TYPES = frozenset({"String", "Number", "CommaDelimitedList", "Json", "Boolean", "ALIYUN::OOS::Parameter::Value",
                             "ALIYUN::OOS::SecretParameter::Value"})
PSEUDO_PARAMETERS = frozenset({
    "ALIYUN::StackId", "ALIYUN::StackName", "ALIYUN::Region", "ALIYUN::AccountId", "ALIYUN::TenantId",
    "ALIYUN::NoValue", "ALIYUN::Index",
})
RESOURCE_KEYS = frozenset({"Type", "Properties", "DependsOn", "Condition", "DeletionPolicy", "Metadata", "Count"})

# Simple value kinds: "string", "integer", "boolean", "list", "map", "any" ("integer" also accepts numeric strings).
_TAGS = {"Tags": "list"}


@dataclass(frozen=True)
class ResourceSchema:
    """What one ROS resource type accepts: required and allowed properties, and attributes for Fn::GetAtt."""

    required: frozenset[str]
    properties: dict[str, str]
    attributes: frozenset[str] = field(default_factory=frozenset)


def _schema(required: set[str], properties: dict[str, str], attributes: set[str]) -> ResourceSchema:
    return ResourceSchema(frozenset(required), properties, frozenset(attributes))


RESOURCE_SCHEMAS: dict[str, ResourceSchema] = {
    "ALIYUN::ECS::VPC": _schema(set(), {
        "CidrBlock": "string", "VpcName": "string", "Description": "string", "EnableIpv6": "boolean",
        "ResourceGroupId": "string", "Ipv6CidrBlock": "string", **_TAGS,
    }, {"VpcId", "VRouterId", "RouteTableId", "CidrBlock", "VpcName"}),
    "ALIYUN::ECS::VSwitch": _schema({"VpcId", "ZoneId", "CidrBlock"}, {
        "VpcId": "string", "ZoneId": "string", "CidrBlock": "string", "VSwitchName": "string", "Description": "string",
        "Ipv6CidrBlock": "integer", **_TAGS,
    }, {"VSwitchId", "CidrBlock", "ZoneId", "VSwitchName"}),
    "ALIYUN::ECS::SecurityGroup": _schema(set(), {
        "VpcId": "string", "SecurityGroupName": "string", "Description": "string", "SecurityGroupType": "string",
        "SecurityGroupIngress": "list", "SecurityGroupEgress": "list", "ResourceGroupId": "string", **_TAGS,
    }, {"SecurityGroupId", "SecurityGroupName"}),
    "ALIYUN::ECS::SecurityGroupIngress": _schema({"IpProtocol", "SecurityGroupId"}, {
        "SecurityGroupId": "string", "IpProtocol": "string", "PortRange": "string", "SourceCidrIp": "string",
        "SourceGroupId": "string", "Policy": "string", "Priority": "integer", "NicType": "string", "Description": "string",
    }, set()),
    "ALIYUN::ECS::Instance": _schema({"ImageId", "InstanceType"}, {
        "ImageId": "string", "InstanceType": "string", "VpcId": "string", "VSwitchId": "string",
        "SecurityGroupId": "string", "SecurityGroupIds": "list", "SystemDiskCategory": "string",
        "SystemDiskSize": "integer", "DiskMappings": "list", "Password": "string", "ZoneId": "string",
        "InstanceName": "string", "HostName": "string", "AllocatePublicIP": "boolean",
        "InternetMaxBandwidthOut": "integer", "InstanceChargeType": "string", "UserData": "string",
        "Description": "string", "DeletionProtection": "boolean", "ResourceGroupId": "string", "RamRoleName": "string",
        **_TAGS,
    }, {"InstanceId", "PrivateIp", "PublicIp", "ZoneId", "HostName", "InnerIp"}),
    "ALIYUN::SLB::LoadBalancer": _schema(set(), {
        "VpcId": "string", "VSwitchId": "string", "AddressType": "string", "LoadBalancerSpec": "string",
        "LoadBalancerName": "string", "InstanceChargeType": "string", "InternetChargeType": "string", "Bandwidth": "integer",
        "MasterZoneId": "string", "SlaveZoneId": "string", "DeletionProtection": "boolean", "AddressIPVersion": "string",
        **_TAGS,
    }, {"LoadBalancerId", "IpAddress", "NetworkType", "AddressType"}),
    "ALIYUN::SLB::Listener": _schema({"LoadBalancerId", "ListenerPort", "Protocol", "Bandwidth"}, {
        "LoadBalancerId": "string", "ListenerPort": "integer", "BackendServerPort": "integer", "Protocol": "string",
        "Bandwidth": "integer", "Scheduler": "string", "HealthCheck": "map", "Persistence": "map",
        "VServerGroupId": "string", "ServerCertificateId": "string", "AclId": "string", "AclStatus": "string",
        "AclType": "string", "StartListener": "boolean",
    }, {"LoadBalancerId", "ListenerPortsAndProtocol"}),
    "ALIYUN::SLB::BackendServerAttachment": _schema({"LoadBalancerId"}, {
        "LoadBalancerId": "string", "BackendServers": "list", "BackendServerList": "list",
        "BackendServerWeightList": "list",
    }, {"LoadBalancerId", "BackendServers"}),
    "ALIYUN::ALB::ServerGroup": _schema({"ServerGroupName", "HealthCheckConfig"}, {
        "ServerGroupName": "string", "HealthCheckConfig": "map", "VpcId": "string", "Protocol": "string",
        "Scheduler": "string", "ServerGroupType": "string", "StickySessionConfig": "map", "ResourceGroupId": "string",
        **_TAGS,
    }, {"ServerGroupId"}),
    "ALIYUN::ALB::Listener": _schema({"LoadBalancerId", "ListenerPort", "ListenerProtocol", "DefaultActions"}, {
        "LoadBalancerId": "string", "ListenerPort": "integer", "ListenerProtocol": "string", "DefaultActions": "list",
        "ListenerDescription": "string", "Certificates": "list", "IdleTimeout": "integer", "RequestTimeout": "integer",
        "GzipEnabled": "boolean", "Http2Enabled": "boolean", "SecurityPolicyId": "string",
    }, {"ListenerId"}),
    "ALIYUN::ALB::BackendServerAttachment": _schema({"ServerGroupId", "Servers"}, {
        "ServerGroupId": "string", "Servers": "list",
    }, {"ServerGroupId"}),
    "ALIYUN::ALB::LoadBalancer": _schema(
        {"VpcId", "AddressType", "LoadBalancerEdition", "LoadBalancerBillingConfig", "ZoneMappings"}, {
            "VpcId": "string", "AddressType": "string", "LoadBalancerEdition": "string",
            "LoadBalancerBillingConfig": "map", "ZoneMappings": "list", "LoadBalancerName": "string",
            "AddressAllocatedMode": "string", "DeletionProtectionEnabled": "boolean", "ResourceGroupId": "string", **_TAGS,
        }, {"LoadBalancerId", "DNSName", "AddressType"}),
    "ALIYUN::VPC::NatGateway": _schema({"VpcId", "VSwitchId"}, {
        "VpcId": "string", "VSwitchId": "string", "NatType": "string", "NatGatewayName": "string",
        "InternetChargeType": "string", "Description": "string", "DeletionProtection": "boolean",
        "NetworkType": "string", "EipBindMode": "string", **_TAGS,
    }, {"NatGatewayId", "SNatTableId", "ForwardTableId"}),
    "ALIYUN::VPC::EIP": _schema(set(), {
        "Bandwidth": "integer", "InternetChargeType": "string", "Name": "string", "Description": "string",
        "Isp": "string", "Netmode": "string", "InstanceChargeType": "string", "DeletionProtection": "boolean", **_TAGS,
    }, {"AllocationId", "EipAddress", "Isp", "Bandwidth"}),
    "ALIYUN::VPC::EIPAssociation": _schema({"AllocationId", "InstanceId"}, {
        "AllocationId": "string", "InstanceId": "string", "PrivateIpAddress": "string",
        "Mode": "string",
    }, {"AllocationId", "EipAddress"}),
    "ALIYUN::VPC::SnatEntry": _schema({"SnatTableId", "SnatIp"}, {
        "SnatTableId": "string", "SnatIp": "string", "SourceVSwitchIds": "list", "SourceCIDR": "string",
        "SnatEntryName": "string", "EipAffinity": "integer",
    }, {"SnatEntryId"}),
    "ALIYUN::RDS::Account": _schema({"DBInstanceId", "AccountName", "AccountPassword"}, {
        "DBInstanceId": "string", "AccountName": "string", "AccountPassword": "string", "AccountType": "string",
        "AccountDescription": "string",
    }, {"AccountName"}),
    "ALIYUN::RDS::DBInstance": _schema({"Engine", "EngineVersion", "DBInstanceClass", "DBInstanceStorage", "SecurityIPList"}, {
        "Engine": "string", "EngineVersion": "string", "DBInstanceClass": "string", "DBInstanceStorage": "integer",
        "SecurityIPList": "string", "VpcId": "string", "VSwitchId": "string", "ZoneId": "string",
        "DBInstanceNetType": "string", "DBInstanceStorageType": "string", "DBInstanceDescription": "string",
        "PayType": "string", "Category": "string", "MasterUsername": "string", "MasterUserPassword": "string",
        "SlaveZoneIds": "list",
        "MasterUserType": "string", "SSLSetting": "string", "DeletionProtection": "boolean",
        "BackupRetentionPeriod": "integer", "Tags": "map",
    }, {"DBInstanceId", "InnerConnectionString", "InnerPort", "PublicConnectionString", "InnerIPAddress"}),
    "ALIYUN::REDIS::Instance": _schema(set(), {
        "InstanceClass": "string", "EngineVersion": "string", "VpcId": "string", "VSwitchId": "string",
        "ZoneId": "string", "InstanceName": "string", "Password": "string", "ChargeType": "string",
        "DeletionForce": "boolean", **_TAGS,
    }, {"InstanceId", "ConnectionDomain", "Port", "PrivateIp"}),
    "ALIYUN::REDIS::Whitelist": _schema({"InstanceId", "SecurityIps"}, {
        "InstanceId": "string", "SecurityIps": "string", "SecurityIpGroupName": "string", "SecurityIpGroupAttribute": "string",
    }, {"SecurityIpGroupName", "SecurityIpGroupAttribute", "SecurityIps"}),
    "ALIYUN::MONGODB::Instance": _schema({"DBInstanceClass", "DBInstanceStorage"}, {
        "DBInstanceClass": "string", "DBInstanceStorage": "integer", "EngineVersion": "string", "VpcId": "string",
        "VSwitchId": "string", "ZoneId": "string", "AccountPassword": "string", "SecurityIPArray": "string",
        "DBInstanceDescription": "string", "StorageEngine": "string", "ChargeType": "string", "StorageType": "string",
        **_TAGS,
    }, {"DBInstanceId", "ConnectionURI", "DBInstanceStatus"}),
    "ALIYUN::POLARDB::DBCluster": _schema({"DBType", "DBVersion", "DBNodeClass", "PayType"}, {
        "DBType": "string", "DBVersion": "string", "DBNodeClass": "string", "PayType": "string", "VpcId": "string",
        "VSwitchId": "string", "ZoneId": "string", "SecurityIPList": "string", "DBClusterDescription": "string",
        "DBNodeNum": "integer", "StorageType": "string", **_TAGS,
    }, {"DBClusterId", "ClusterConnectionString", "PrimaryConnectionString", "ClusterEndpointId"}),
    "ALIYUN::DNS::DomainRecord": _schema({"DomainName", "RR", "Type", "Value"}, {
        "DomainName": "string", "RR": "string", "Type": "string", "Value": "string", "TTL": "integer",
        "Priority": "integer", "Line": "string",
    }, {"RecordId"}),
    "ALIYUN::NAS::FileSystem": _schema({"ProtocolType", "StorageType"}, {
        "ProtocolType": "string", "StorageType": "string", "FileSystemType": "string", "EncryptType": "integer",
        "Description": "string", "ZoneId": "string", "Capacity": "integer", **_TAGS,
    }, {"FileSystemId"}),
    "ALIYUN::NAS::MountTarget": _schema({"FileSystemId", "NetworkType", "AccessGroupName"}, {
        "FileSystemId": "string", "NetworkType": "string", "VpcId": "string", "VSwitchId": "string",
        "AccessGroupName": "string", "SecurityGroupId": "string", "EnableIpv6": "boolean",
    }, {"MountTargetDomain"}),
    "ALIYUN::NLB::LoadBalancer": _schema({"VpcId", "AddressType", "ZoneMappings"}, {
        "LoadBalancerName": "string", "VpcId": "string", "AddressType": "string", "AddressIpVersion": "string",
        "ZoneMappings": "list", "LoadBalancerType": "string", "LoadBalancerBillingConfig": "map",
        "DeletionProtectionConfig": "map", "ResourceGroupId": "string", **_TAGS,
    }, {"LoadBalancerId", "DNSName", "LoadBalancerArn"}),
    "ALIYUN::NLB::ServerGroup": _schema({"ServerGroupName", "VpcId"}, {
        "ServerGroupName": "string", "VpcId": "string", "Protocol": "string", "ServerGroupType": "string",
        "HealthCheckConfig": "map", "Scheduler": "string", "ConnectionDrainEnabled": "boolean",
        "PreserveClientIpEnabled": "boolean", "ResourceGroupId": "string", **_TAGS,
    }, {"ServerGroupId"}),
    "ALIYUN::NLB::Listener": _schema({"LoadBalancerId", "ListenerProtocol", "ServerGroupId"}, {
        "LoadBalancerId": "string", "ListenerProtocol": "string", "ListenerPort": "integer", "ServerGroupId": "string",
        "StartPort": "integer", "EndPort": "integer", "IdleTimeout": "integer", "ListenerDescription": "string",
        "CertificateIds": "list", "SecurityPolicyId": "string",
    }, {"ListenerId"}),
    "ALIYUN::NLB::BackendServerAttachment": _schema({"ServerGroupId", "Servers"}, {
        "ServerGroupId": "string", "Servers": "list",
    }, {"ServerGroupId"}),
    "ALIYUN::RAM::Role": _schema({"RoleName", "AssumeRolePolicyDocument"}, {
        "RoleName": "string", "AssumeRolePolicyDocument": "map", "Description": "string", "Policies": "list",
        "MaxSessionDuration": "integer", "DeletionForce": "boolean",
    }, {"RoleName", "RoleId", "Arn"}),
    "ALIYUN::RAM::ManagedPolicy": _schema({"PolicyName"}, {
        "PolicyName": "string", "PolicyDocument": "map", "PolicyDocumentUnchecked": "map", "Description": "string",
        "Roles": "list", "Users": "list", "Groups": "list",
    }, {"PolicyName"}),
    "ALIYUN::FC::Service": _schema({"ServiceName"}, {
        "ServiceName": "string", "Description": "string", "Role": "string", "LogConfig": "map", "VpcConfig": "map",
        "NasConfig": "map", "InternetAccess": "boolean", "TracingConfig": "map", **_TAGS,
    }, {"ServiceName", "ServiceId", "Role", "LogProject", "Logstore"}),
    "ALIYUN::FC::Function": _schema({"ServiceName", "FunctionName", "Handler", "Runtime"}, {
        "ServiceName": "string", "FunctionName": "string", "Handler": "string", "Runtime": "string",
        "MemorySize": "integer", "Timeout": "integer", "Code": "map", "Description": "string",
        "EnvironmentVariables": "map", "InstanceConcurrency": "integer", "InstanceType": "string",
    }, {"ServiceName", "FunctionName", "FunctionId", "ARN"}),
    "ALIYUN::FC::Trigger": _schema({"ServiceName", "FunctionName", "TriggerName", "TriggerType", "TriggerConfig"}, {
        "ServiceName": "string", "FunctionName": "string", "TriggerName": "string", "TriggerType": "string",
        "TriggerConfig": "map", "Qualifier": "string", "InvocationRole": "string", "SourceArn": "string",
    }, {"TriggerName", "TriggerId", "UrlInternet", "UrlIntranet"}),
    "ALIYUN::CS::ManagedKubernetesCluster": _schema({"Name", "VpcId"}, {
        "Name": "string", "ClusterSpec": "string", "VpcId": "string", "VSwitchIds": "list", "PodVswitchIds": "list",
        "ContainerCidr": "string", "ServiceCidr": "string", "SnatEntry": "boolean", "EndpointPublicAccess": "boolean",
        "KubernetesVersion": "string", "Addons": "list", "ProxyMode": "string", "DeletionProtection": "boolean",
        "ResourceGroupId": "string", **_TAGS,
    }, {"ClusterId", "APIServerSLBId", "IngressSLBId", "DefaultUserKubeConfig", "WorkerRamRoleName"}),
    "ALIYUN::CS::ClusterNodePool": _schema({"ClusterId", "NodePoolInfo", "ScalingGroup"}, {
        "ClusterId": "string", "NodePoolInfo": "map", "ScalingGroup": "map", "KubernetesConfig": "map",
        "Management": "map", "AutoScaling": "map", "Count": "integer",
    }, {"NodePoolId"}),
    "ALIYUN::ESS::ScalingGroup": _schema({"MinSize", "MaxSize"}, {
        "ScalingGroupName": "string", "MinSize": "integer", "MaxSize": "integer", "VSwitchIds": "list",
        "VSwitchId": "string", "LoadBalancerIds": "list", "DBInstanceIds": "list", "MultiAZPolicy": "string",
        "RemovalPolicys": "list", "DefaultCooldown": "integer", "DesiredCapacity": "integer", **_TAGS,
    }, {"ScalingGroupId", "ScalingGroupName"}),
    "ALIYUN::ESS::ScalingConfiguration": _schema({"ScalingGroupId"}, {
        "ScalingGroupId": "string", "ImageId": "string", "InstanceType": "string", "InstanceTypes": "list",
        "SecurityGroupId": "string", "SystemDiskCategory": "string", "SystemDiskSize": "integer",
        "InternetMaxBandwidthOut": "integer", "DiskMappings": "list", "RamRoleName": "string", "UserData": "string",
        "ScalingConfigurationName": "string", "KeyPairName": "string",
    }, {"ScalingConfigurationId"}),
    "ALIYUN::ESS::ScalingGroupEnable": _schema({"ScalingGroupId"}, {
        "ScalingGroupId": "string", "ScalingConfigurationId": "string", "InstanceIds": "list",
        "ScalingRuleArisExecuteVersion": "string",
    }, {"ScalingGroupId"}),
    "ALIYUN::KMS::Key": _schema(set(), {
        "Description": "string", "KeyUsage": "string", "KeySpec": "string", "ProtectionLevel": "string",
        "EnableAutomaticRotation": "boolean", "RotationInterval": "string", "PendingWindowInDays": "integer",
        "Enable": "boolean", "DKMSInstanceId": "string", **_TAGS,
    }, {"KeyId", "Arn"}),
    "ALIYUN::SLS::Project": _schema({"Name"}, {"Name": "string", "Description": "string", **_TAGS}, {"Name"}),
    "ALIYUN::SLS::Logstore": _schema({"ProjectName", "LogstoreName"}, {
        "ProjectName": "string", "LogstoreName": "string", "TTL": "integer", "ShardCount": "integer",
        "AutoSplit": "boolean", "MaxSplitShard": "integer", "EnableTracking": "boolean", "AppendMeta": "boolean",
        "EncryptConf": "map", "Mode": "string",
    }, {"LogstoreName", "ProjectName"}),
    "ALIYUN::OSS::Bucket": _schema({"BucketName"}, {
        "BucketName": "string", "AccessControl": "string", "ServerSideEncryptionConfiguration": "map",
        "VersioningConfiguration": "map", "LoggingConfiguration": "map", "LifecycleConfiguration": "map",
        "StorageClass": "string", "RedundancyType": "string", "DeletionForce": "boolean", "Tags": "map",
    }, {"Name", "DomainName", "InternalDomainName", "Arn"}),
}
assert set(RESOURCE_SCHEMAS) == set(ROS_TYPES), "ros_schema and catalog must list the same ROS types"

_INTRINSICS = ("Ref", "Fn::GetAtt", "Fn::Join", "Fn::Sub", "Fn::Select", "Fn::If", "Fn::Base64Encode", "Fn::Split",
               "Fn::Replace", "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Fn::FindInMap", "Fn::GetAZs", "Fn::Str",
               "Fn::Jq", "Fn::MergeMapToList", "Fn::Sub", "Fn::Length", "Fn::ListMerge")


def _is_intrinsic(value: Any) -> bool:
    """An intrinsic function call resolves at deploy time, so its static type is unknown."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _INTRINSICS


def _type_ok(value: Any, kind: str) -> bool:
    """Whether ``value`` fits the simple ``kind`` (intrinsic calls always fit)."""
    if _is_intrinsic(value) or kind == "any":
        return True
    if kind == "string":
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit())
    if kind == "boolean":
        return isinstance(value, bool) or value in ("true", "false", "True", "False")
    if kind == "list":
        return isinstance(value, list)
    if kind == "map":
        return isinstance(value, dict)
    return False


def _walk_references(value: Any, path: str, names: set[str], resources: set[str], problems: list[str],
                     types: dict[str, str]) -> None:
    """Recursively check every ``Ref`` and ``Fn::GetAtt`` under ``value``."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _walk_references(item, f"{path}[{index}]", names, resources, problems, types)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key == "Ref":
            if not isinstance(item, str) or (item not in names and item not in PSEUDO_PARAMETERS):
                problems.append(f"{path}: Ref to unknown parameter or resource {item!r}")
        elif key == "Fn::GetAtt":
            _check_get_att(item, path, resources, problems, types)
        else:
            _walk_references(item, f"{path}.{key}", names, resources, problems, types)


def _check_get_att(item: Any, path: str, resources: set[str], problems: list[str], types: dict[str, str]) -> None:
    """``Fn::GetAtt`` must be [resource, attribute] on a declared resource with a known attribute."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        problems.append(f"{path}: Fn::GetAtt must be [ResourceName, AttributeName]")
        return
    resource, attribute = item
    if resource not in resources:
        problems.append(f"{path}: Fn::GetAtt on unknown resource {resource!r}")
        return
    schema = RESOURCE_SCHEMAS.get(types.get(resource, ""))
    rule = ros_rule(types.get(resource, "")) if schema is None and isinstance(types.get(resource), str) else None
    attributes = schema.attributes if schema is not None else rule.attributes if rule is not None else frozenset()
    if attributes and isinstance(attribute, str) and attribute not in attributes:
        problems.append(f"{path}: resource {resource!r} has no attribute {attribute!r}")


def _check_parameters(parameters: Any, problems: list[str]) -> None:
    if not isinstance(parameters, dict):
        problems.append("Parameters must be a mapping")
        return
    for name, parameter in parameters.items():
        if not isinstance(parameter, dict) or parameter.get("Type") not in PARAMETER_TYPES:
            problems.append(f"Parameters.{name}: missing or unknown Type")


def _rule_properties(ros_type: str) -> frozenset[str]:
    """The properties the rostran rules list for a type (read only when the hand-written schema does not know one)."""
    rule = ros_rule(ros_type)
    return rule.properties if rule is not None else frozenset()


def _check_resource(name: str, resource: Any, problems: list[str]) -> None:
    """Type known, required properties present, no unknown properties, simple value types."""
    if not isinstance(resource, dict):
        problems.append(f"Resources.{name}: must be a mapping")
        return
    for key in resource:
        if key not in RESOURCE_KEYS:
            problems.append(f"Resources.{name}: unknown key {key!r}")
    ros_type = resource.get("Type")
    schema = RESOURCE_SCHEMAS.get(ros_type) if isinstance(ros_type, str) else None
    rule = ros_rule(ros_type) if schema is None and isinstance(ros_type, str) else None
    if schema is None and rule is None:
        problems.append(f"Resources.{name}: unknown or unsupported resource type {ros_type!r}")
        return
    properties = resource.get("Properties", {})
    if not isinstance(properties, dict):
        problems.append(f"Resources.{name}.Properties: must be a mapping")
        return
    if schema is None:
        problems.extend(f"Resources.{name}: unknown property {prop!r} for {ros_type}"
                        for prop in properties if rule is not None and prop not in rule.properties)
        return
    for required in sorted(schema.required - set(properties)):
        problems.append(f"Resources.{name}: missing required property {required!r} for {ros_type}")
    for prop, value in properties.items():
        kind = schema.properties.get(prop)
        if kind is None and prop in _rule_properties(ros_type):
            continue  # a real property this schema does not type
        if kind is None:
            problems.append(f"Resources.{name}: unknown property {prop!r} for {ros_type}")
        elif not _type_ok(value, kind):
            problems.append(f"Resources.{name}.Properties.{prop}: expected {kind}")


def _check_depends_on(name: str, resource: dict[str, Any], resources: set[str], problems: list[str]) -> None:
    depends = resource.get("DependsOn", [])
    for target in [depends] if isinstance(depends, str) else depends:
        if target not in resources:
            problems.append(f"Resources.{name}: DependsOn unknown resource {target!r}")


def validate_ros(template: dict[str, Any]) -> list[str]:
    """Problems found in a ROS template (an empty list means it is valid for the supported types)."""
    if not isinstance(template, dict):
        return ["template must be a mapping"]
    problems: list[str] = []
    if template.get("ROSTemplateFormatVersion") != "2015-09-01":
        problems.append("ROSTemplateFormatVersion must be '2015-09-01'")
    for key in template:
        if key not in TOP_LEVEL_KEYS:
            problems.append(f"unknown top-level key {key!r}")
    parameters = template.get("Parameters", {}) or {}
    _check_parameters(parameters, problems)
    resources = template.get("Resources")
    if not isinstance(resources, dict) or not resources:
        problems.append("Resources must be a non-empty mapping")
        return problems
    names = set(resources) | (set(parameters) if isinstance(parameters, dict) else set())
    types = {name: res.get("Type", "") for name, res in resources.items() if isinstance(res, dict)}
    for name, resource in resources.items():
        _check_resource(name, resource, problems)
        if isinstance(resource, dict):
            _check_depends_on(name, resource, set(resources), problems)
            _walk_references(resource.get("Properties", {}), f"Resources.{name}.Properties", names, set(resources),
                             problems, types)
    outputs = template.get("Outputs", {}) or {}
    for name, output in outputs.items() if isinstance(outputs, dict) else []:
        if not isinstance(output, dict) or "Value" not in output:
            problems.append(f"Outputs.{name}: missing Value")
            continue
        _walk_references(output["Value"], f"Outputs.{name}.Value", names, set(resources), problems, types)
    return problems
