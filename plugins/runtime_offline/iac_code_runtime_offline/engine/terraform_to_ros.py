"""Terraform (alicloud provider) → ROS template conversion.

Deterministic and offline: the HCL is parsed with python-hcl2, the resource
types listed in :mod:`iac_code_runtime_offline.engine.catalog` are mapped to their ROS
counterparts by hand-written tables, every other type for which Alibaba Cloud's
rostran rules give a ROS type is mapped by those rules (:mod:`.rostran_rules`),
and references become ``Ref`` / ``Fn::GetAtt``.  Anything that cannot be
expressed faithfully is reported in ``unconverted`` or ``warnings`` (and, in
short, in ``unmapped_types`` / ``unmapped_properties``) instead of being dropped
silently, and bad input never raises.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import hcl2
import yaml

from iac_code_runtime_offline.engine.catalog import ROS_TEMPLATE_VERSION, TERRAFORM_TO_ROS
from iac_code_runtime_offline.engine.ros_schema import RESOURCE_SCHEMAS
from iac_code_runtime_offline.engine.rostran_rules import PropertyRule, TerraformRule, ros_rule, terraform_rule

__all__ = ["ConversionResult", "convert"]


@dataclass(frozen=True)
class ConversionResult:
    """Outcome of one conversion: the ROS template plus an honest account of what was left out."""

    template: dict[str, Any]
    text: str
    converted: list[str] = field(default_factory=list)
    unconverted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The loss report in short: resource types with no ROS mapping, and "type.name.argument" entries for every
    # argument of a converted resource that did not make it into the template.
    unmapped_types: list[str] = field(default_factory=list)
    unmapped_properties: list[str] = field(default_factory=list)

    @property
    def lossless(self) -> bool:
        """Whether everything in the input made it into the template (nothing unconverted, no argument dropped)."""
        return not self.unconverted and not self.unmapped_properties


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter when present: the same YAML, faster


class _Unmappable(Exception):
    """An expression that has no faithful ROS equivalent; carries the reason."""


# Older resource type names accepted by the alicloud provider for the same resources.
_ALIASES = {"alicloud_eip": "alicloud_eip_address", "alicloud_slb": "alicloud_slb_load_balancer",
            "alicloud_db_account": "alicloud_rds_account", "alicloud_dns_record": "alicloud_alidns_record"}

# Terraform attribute -> ROS Fn::GetAtt attribute, per Terraform type ("id" is always Ref).
_ATTRIBUTES: dict[str, dict[str, str]] = {
    "alicloud_vpc": {"router_id": "VRouterId", "route_table_id": "RouteTableId", "cidr_block": "CidrBlock"},
    "alicloud_vswitch": {"cidr_block": "CidrBlock", "zone_id": "ZoneId"},
    "alicloud_security_group": {},
    "alicloud_security_group_rule": {},
    "alicloud_instance": {"public_ip": "PublicIp", "private_ip": "PrivateIp", "availability_zone": "ZoneId"},
    "alicloud_slb_load_balancer": {"address": "IpAddress"},
    "alicloud_alb_load_balancer": {"dns_name": "DNSName"},
    "alicloud_slb_listener": {},
    "alicloud_slb_backend_server": {},
    "alicloud_alb_server_group": {},
    "alicloud_alb_listener": {},
    "alicloud_alb_server_group_server_attachment": {},
    "alicloud_nat_gateway": {"snat_table_ids": "SNatTableId", "forward_table_ids": "ForwardTableId"},
    "alicloud_eip_address": {"ip_address": "EipAddress"},
    "alicloud_eip_association": {},
    "alicloud_snat_entry": {},
    "alicloud_db_instance": {"connection_string": "InnerConnectionString", "port": "InnerPort"},
    "alicloud_rds_account": {},
    "alicloud_db_account": {},
    "alicloud_kvstore_instance": {"connection_domain": "ConnectionDomain", "port": "Port"},
    "alicloud_oss_bucket": {"bucket": "Name"},
    "alicloud_mongodb_instance": {"replica_set_name": "ReplicaSetName"},
    "alicloud_polardb_cluster": {"connection_string": "ClusterConnectionString"},
    "alicloud_kms_key": {"arn": "Arn"},
    "alicloud_ess_scaling_group": {},
    "alicloud_ess_scaling_configuration": {},
    "alicloud_cs_managed_kubernetes": {},
    "alicloud_cs_kubernetes_node_pool": {},
    "alicloud_fc_service": {"name": "ServiceName", "service_id": "ServiceId"},
    "alicloud_fc_function": {"name": "FunctionName", "function_id": "FunctionId", "function_arn": "ARN"},
    "alicloud_fc_trigger": {"name": "TriggerName", "trigger_id": "TriggerId"},
    "alicloud_ram_role": {"arn": "Arn", "role_name": "RoleName", "name": "RoleName"},
    "alicloud_ram_policy": {"policy_name": "PolicyName", "name": "PolicyName"},
    "alicloud_nlb_load_balancer": {"dns_name": "DNSName"},
    "alicloud_nlb_server_group": {},
    "alicloud_nlb_listener": {},
    "alicloud_nlb_server_group_server_attachment": {},
    "alicloud_nas_file_system": {},
    "alicloud_nas_mount_target": {"mount_target_domain": "MountTargetDomain"},
    "alicloud_alidns_record": {},
    "alicloud_log_project": {"project_name": "Name", "name": "Name"},
    "alicloud_log_store": {"logstore_name": "LogstoreName", "name": "LogstoreName", "project_name": "ProjectName"},
}

_PAY_AS_YOU_GO = {"PayAsYouGo": "PostPaid", "Subscription": "PrePaid", "PostPaid": "PostPaid", "PrePaid": "PrePaid"}
_SLB_CHARGE = {"PayByTraffic": "paybytraffic", "PayByBandwidth": "paybybandwidth"}

# Terraform property -> (ROS property, transform name). Transforms are defined in _TRANSFORMS below.
_P = tuple[str, str]
_PROPERTIES: dict[str, dict[str, _P]] = {
    "alicloud_vpc": {
        "cidr_block": ("CidrBlock", "value"),
        "vpc_name": ("VpcName", "value"),
        "name": ("VpcName", "value"),
        "description": ("Description", "value"),
        "resource_group_id": ("ResourceGroupId", "value"),
        "enable_ipv6": ("EnableIpv6", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_vswitch": {
        "vpc_id": ("VpcId", "value"),
        "cidr_block": ("CidrBlock", "value"),
        "zone_id": ("ZoneId", "value"),
        "availability_zone": ("ZoneId", "value"),
        "vswitch_name": ("VSwitchName", "value"),
        "name": ("VSwitchName", "value"),
        "description": ("Description", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_security_group": {
        "vpc_id": ("VpcId", "value"),
        "name": ("SecurityGroupName", "value"),
        "security_group_name": ("SecurityGroupName", "value"),
        "description": ("Description", "value"),
        "security_group_type": ("SecurityGroupType", "value"),
        "resource_group_id": ("ResourceGroupId", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_security_group_rule": {
        "security_group_id": ("SecurityGroupId", "value"),
        "ip_protocol": ("IpProtocol", "value"),
        "port_range": ("PortRange", "value"),
        "cidr_ip": ("SourceCidrIp", "value"),
        "source_security_group_id": ("SourceGroupId", "value"),
        "policy": ("Policy", "value"),
        "priority": ("Priority", "int"),
        "nic_type": ("NicType", "value"),
        "description": ("Description", "value"),
        "type": ("", "skip"),
    },
    "alicloud_instance": {
        "image_id": ("ImageId", "value"),
        "instance_type": ("InstanceType", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "security_groups": ("SecurityGroupId", "first"),
        "availability_zone": ("ZoneId", "value"),
        "system_disk_category": ("SystemDiskCategory", "value"),
        "system_disk_size": ("SystemDiskSize", "int"),
        "instance_name": ("InstanceName", "value"),
        "host_name": ("HostName", "value"),
        "password": ("Password", "secret"),
        "internet_max_bandwidth_out": ("InternetMaxBandwidthOut", "int"),
        "internet_charge_type": ("InternetChargeType", "value"),
        "instance_charge_type": ("InstanceChargeType", "value"),
        "period": ("Period", "int"),
        "period_unit": ("PeriodUnit", "value"),
        "key_name": ("KeyPairName", "value"),
        "user_data": ("UserData", "value"),
        "description": ("Description", "value"),
        "tags": ("Tags", "tag_list"),
        "role_name": ("RamRoleName", "value"),
    },
    "alicloud_slb_load_balancer": {
        "load_balancer_name": ("LoadBalancerName", "value"),
        "name": ("LoadBalancerName", "value"),
        "address_type": ("AddressType", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "load_balancer_spec": ("LoadBalancerSpec", "value"),
        "specification": ("LoadBalancerSpec", "value"),
        "payment_type": ("", "slb_pay"),
        "internet_charge_type": ("InternetChargeType", "slb_charge"),
        "bandwidth": ("Bandwidth", "int"),
        "master_zone_id": ("MasterZoneId", "value"),
        "slave_zone_id": ("SlaveZoneId", "value"),
        "address_ip_version": ("AddressIPVersion", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_alb_load_balancer": {
        "load_balancer_name": ("LoadBalancerName", "value"),
        "vpc_id": ("VpcId", "value"),
        "address_type": ("AddressType", "value"),
        "address_allocated_mode": ("AddressAllocatedMode", "value"),
        "load_balancer_edition": ("LoadBalancerEdition", "value"),
        "load_balancer_billing_config": ("LoadBalancerBillingConfig", "alb_billing"),
        "zone_mappings": ("ZoneMappings", "alb_zones"),
        "resource_group_id": ("ResourceGroupId", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_slb_listener": {
        "load_balancer_id": ("LoadBalancerId", "value"),
        "frontend_port": ("ListenerPort", "int"),
        "backend_port": ("BackendServerPort", "int"),
        "protocol": ("Protocol", "value"),
        "bandwidth": ("Bandwidth", "int"),
        "scheduler": ("Scheduler", "value"),
        "server_group_id": ("VServerGroupId", "value"),
        "server_certificate_id": ("ServerCertificateId", "value"),
        "acl_id": ("AclId", "value"),
        "acl_status": ("AclStatus", "value"),
        "acl_type": ("AclType", "value"),
    },
    "alicloud_slb_backend_server": {
        "load_balancer_id": ("LoadBalancerId", "value"),
        "backend_servers": ("BackendServers", "slb_servers"),
    },
    "alicloud_alb_server_group": {
        "server_group_name": ("ServerGroupName", "value"),
        "vpc_id": ("VpcId", "value"),
        "protocol": ("Protocol", "value"),
        "scheduler": ("Scheduler", "value"),
        "server_group_type": ("ServerGroupType", "value"),
        "resource_group_id": ("ResourceGroupId", "value"),
        "health_check_config": ("HealthCheckConfig", "camel_block"),
        "sticky_session_config": ("StickySessionConfig", "camel_block"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_alb_listener": {
        "load_balancer_id": ("LoadBalancerId", "value"),
        "listener_port": ("ListenerPort", "int"),
        "listener_protocol": ("ListenerProtocol", "value"),
        "listener_description": ("ListenerDescription", "value"),
        "idle_timeout": ("IdleTimeout", "int"),
        "request_timeout": ("RequestTimeout", "int"),
        "gzip_enabled": ("GzipEnabled", "value"),
        "http2_enabled": ("Http2Enabled", "value"),
        "security_policy_id": ("SecurityPolicyId", "value"),
        "default_actions": ("DefaultActions", "alb_actions"),
    },
    # One server per Terraform attachment; ROS attaches a list, so the server fields fill Servers[0].
    "alicloud_alb_server_group_server_attachment": {
        "server_group_id": ("ServerGroupId", "value"),
        "server_id": ("Servers.0.ServerId", "value"),
        "server_type": ("Servers.0.ServerType", "value"),
        "port": ("Servers.0.Port", "int"),
        "weight": ("Servers.0.Weight", "int"),
        "server_ip": ("Servers.0.ServerIp", "value"),
        "description": ("Servers.0.Description", "value"),
    },
    "alicloud_nat_gateway": {
        "vpc_id": ("VpcId", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "nat_type": ("NatType", "value"),
        "nat_gateway_name": ("NatGatewayName", "value"),
        "name": ("NatGatewayName", "value"),
        "description": ("Description", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_eip_address": {
        "bandwidth": ("Bandwidth", "int"),
        "internet_charge_type": ("InternetChargeType", "value"),
        "address_name": ("Name", "value"),
        "name": ("Name", "value"),
        "isp": ("Isp", "value"),
        "payment_type": ("InstanceChargeType", "pay"),
        "description": ("Description", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_eip_association": {
        "allocation_id": ("AllocationId", "value"),
        "instance_id": ("InstanceId", "value"),
        "private_ip_address": ("PrivateIpAddress", "value"),
    },
    "alicloud_snat_entry": {
        "snat_table_id": ("SnatTableId", "value"),
        "source_vswitch_id": ("SourceVSwitchIds", "as_list"),
        "source_cidr": ("SourceCIDR", "value"),
        "snat_ip": ("SnatIp", "value"),
        "snat_entry_name": ("SnatEntryName", "value"),
    },
    "alicloud_db_instance": {
        "engine": ("Engine", "value"),
        "engine_version": ("EngineVersion", "value"),
        "instance_type": ("DBInstanceClass", "value"),
        "instance_storage": ("DBInstanceStorage", "int"),
        "db_instance_storage_type": ("DBInstanceStorageType", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "zone_id": ("ZoneId", "value"),
        "security_ips": ("SecurityIPList", "csv"),
        "zone_id_slave_a": ("SlaveZoneIds", "as_list"),
        "instance_name": ("DBInstanceDescription", "value"),
        "instance_charge_type": ("PayType", "value"),
        "tags": ("Tags", "tag_map"),
    },
    "alicloud_rds_account": {
        "db_instance_id": ("DBInstanceId", "value"),
        "account_name": ("AccountName", "value"),
        "account_password": ("AccountPassword", "secret"),
        "account_type": ("AccountType", "value"),
        "account_description": ("AccountDescription", "value"),
    },
    "alicloud_kvstore_instance": {
        "instance_class": ("InstanceClass", "value"),
        "db_instance_name": ("InstanceName", "value"),
        "instance_name": ("InstanceName", "value"),
        "engine_version": ("EngineVersion", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "zone_id": ("ZoneId", "value"),
        "availability_zone": ("ZoneId", "value"),
        "password": ("Password", "secret"),
        "payment_type": ("ChargeType", "pay"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_mongodb_instance": {
        "engine_version": ("EngineVersion", "value"),
        "db_instance_class": ("DBInstanceClass", "value"),
        "db_instance_storage": ("DBInstanceStorage", "int"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "zone_id": ("ZoneId", "value"),
        "security_ip_list": ("SecurityIPArray", "csv"),
        "account_password": ("AccountPassword", "secret"),
        "name": ("DBInstanceDescription", "value"),
        "storage_engine": ("StorageEngine", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_polardb_cluster": {
        "db_type": ("DBType", "value"),
        "db_version": ("DBVersion", "value"),
        "db_node_class": ("DBNodeClass", "value"),
        "pay_type": ("PayType", "polardb_pay"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "zone_id": ("ZoneId", "value"),
        "security_ips": ("SecurityIPList", "csv"),
        "description": ("DBClusterDescription", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_alidns_record": {
        "domain_name": ("DomainName", "value"),
        "rr": ("RR", "value"),
        "type": ("Type", "value"),
        "value": ("Value", "value"),
        "ttl": ("TTL", "int"),
        "priority": ("Priority", "int"),
        "line": ("Line", "value"),
    },
    "alicloud_nas_file_system": {
        "protocol_type": ("ProtocolType", "value"),
        "storage_type": ("StorageType", "value"),
        "file_system_type": ("FileSystemType", "value"),
        "encrypt_type": ("EncryptType", "int"),
        "description": ("Description", "value"),
        "zone_id": ("ZoneId", "value"),
        "capacity": ("Capacity", "int"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_nas_mount_target": {
        "file_system_id": ("FileSystemId", "value"),
        "access_group_name": ("AccessGroupName", "value"),
        "vswitch_id": ("VSwitchId", "value"),
        "vpc_id": ("VpcId", "value"),
        "network_type": ("NetworkType", "value"),
        "security_group_id": ("SecurityGroupId", "value"),
    },
    "alicloud_nlb_load_balancer": {
        "load_balancer_name": ("LoadBalancerName", "value"),
        "load_balancer_type": ("LoadBalancerType", "value"),
        "address_type": ("AddressType", "value"),
        "address_ip_version": ("AddressIpVersion", "lower"),
        "vpc_id": ("VpcId", "value"),
        "zone_mappings": ("ZoneMappings", "alb_zones"),
        "resource_group_id": ("ResourceGroupId", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_nlb_server_group": {
        "server_group_name": ("ServerGroupName", "value"),
        "server_group_type": ("ServerGroupType", "value"),
        "vpc_id": ("VpcId", "value"),
        "protocol": ("Protocol", "value"),
        "scheduler": ("Scheduler", "value"),
        "health_check": ("HealthCheckConfig", "camel_block"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_nlb_listener": {
        "load_balancer_id": ("LoadBalancerId", "value"),
        "listener_protocol": ("ListenerProtocol", "value"),
        "listener_port": ("ListenerPort", "int"),
        "server_group_id": ("ServerGroupId", "value"),
        "idle_timeout": ("IdleTimeout", "int"),
        "listener_description": ("ListenerDescription", "value"),
    },
    "alicloud_nlb_server_group_server_attachment": {
        "server_group_id": ("ServerGroupId", "value"),
        "server_id": ("Servers.0.ServerId", "value"),
        "server_type": ("Servers.0.ServerType", "value"),
        "port": ("Servers.0.Port", "int"),
        "weight": ("Servers.0.Weight", "int"),
    },
    "alicloud_ram_role": {
        "role_name": ("RoleName", "value"),
        "name": ("RoleName", "value"),
        "assume_role_policy_document": ("AssumeRolePolicyDocument", "json_doc"),
        "document": ("AssumeRolePolicyDocument", "json_doc"),
        "description": ("Description", "value"),
        "max_session_duration": ("MaxSessionDuration", "int"),
    },
    "alicloud_ram_policy": {
        "policy_name": ("PolicyName", "value"),
        "name": ("PolicyName", "value"),
        "policy_document": ("PolicyDocument", "json_doc"),
        "document": ("PolicyDocument", "json_doc"),
        "description": ("Description", "value"),
    },
    "alicloud_fc_service": {
        "name": ("ServiceName", "value"),
        "description": ("Description", "value"),
        "role": ("Role", "value"),
        "internet_access": ("InternetAccess", "value"),
        "log_config": ("LogConfig", "camel_block"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_fc_function": {
        "service": ("ServiceName", "value"),
        "name": ("FunctionName", "value"),
        "runtime": ("Runtime", "value"),
        "handler": ("Handler", "value"),
        "memory_size": ("MemorySize", "int"),
        "timeout": ("Timeout", "int"),
        "description": ("Description", "value"),
        "oss_bucket": ("Code.OssBucketName", "value"),
        "oss_key": ("Code.OssObjectName", "value"),
        "environment_variables": ("EnvironmentVariables", "value"),
        "instance_concurrency": ("InstanceConcurrency", "int"),
    },
    "alicloud_fc_trigger": {
        "service": ("ServiceName", "value"),
        "function": ("FunctionName", "value"),
        "name": ("TriggerName", "value"),
        "type": ("TriggerType", "value"),
        "config": ("TriggerConfig", "fc_config"),
        "qualifier": ("Qualifier", "value"),
    },
    "alicloud_cs_managed_kubernetes": {
        "name": ("Name", "value"),
        "cluster_spec": ("ClusterSpec", "value"),
        "vswitch_ids": ("VSwitchIds", "as_list"),
        "worker_vswitch_ids": ("VSwitchIds", "as_list"),
        "pod_vswitch_ids": ("PodVswitchIds", "as_list"),
        "pod_cidr": ("ContainerCidr", "value"),
        "service_cidr": ("ServiceCidr", "value"),
        "new_nat_gateway": ("SnatEntry", "value"),
        "slb_internet_enabled": ("EndpointPublicAccess", "value"),
        "version": ("KubernetesVersion", "value"),
        "proxy_mode": ("ProxyMode", "value"),
        "deletion_protection": ("DeletionProtection", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_cs_kubernetes_node_pool": {
        "cluster_id": ("ClusterId", "value"),
        "node_pool_name": ("NodePoolInfo.Name", "value"),
        "name": ("NodePoolInfo.Name", "value"),
        "vswitch_ids": ("ScalingGroup.VSwitchIds", "as_list"),
        "instance_types": ("ScalingGroup.InstanceTypes", "as_list"),
        "system_disk_category": ("ScalingGroup.SystemDiskCategory", "value"),
        "system_disk_size": ("ScalingGroup.SystemDiskSize", "int"),
        "desired_size": ("ScalingGroup.DesiredSize", "int"),
        "runtime_name": ("KubernetesConfig.Runtime", "value"),
    },
    "alicloud_ess_scaling_group": {
        "scaling_group_name": ("ScalingGroupName", "value"),
        "min_size": ("MinSize", "int"),
        "max_size": ("MaxSize", "int"),
        "vswitch_ids": ("VSwitchIds", "as_list"),
        "loadbalancer_ids": ("LoadBalancerIds", "as_list"),
        "db_instance_ids": ("DBInstanceIds", "as_list"),
        "multi_az_policy": ("MultiAZPolicy", "value"),
        "removal_policies": ("RemovalPolicys", "as_list"),
        "default_cooldown": ("DefaultCooldown", "int"),
        "desired_capacity": ("DesiredCapacity", "int"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_ess_scaling_configuration": {
        "scaling_group_id": ("ScalingGroupId", "value"),
        "image_id": ("ImageId", "value"),
        "instance_type": ("InstanceType", "value"),
        "instance_types": ("InstanceTypes", "as_list"),
        "security_group_id": ("SecurityGroupId", "value"),
        "system_disk_category": ("SystemDiskCategory", "value"),
        "system_disk_size": ("SystemDiskSize", "int"),
        "internet_max_bandwidth_out": ("InternetMaxBandwidthOut", "int"),
        "role_name": ("RamRoleName", "value"),
        "scaling_configuration_name": ("ScalingConfigurationName", "value"),
        "active": ("", "skip"),
        "enable": ("", "skip"),
        "force_delete": ("", "skip"),
    },
    "alicloud_kms_key": {
        "description": ("Description", "value"),
        "key_usage": ("KeyUsage", "value"),
        "key_spec": ("KeySpec", "value"),
        "protection_level": ("ProtectionLevel", "value"),
        "automatic_rotation": ("EnableAutomaticRotation", "enabled_flag"),
        "rotation_interval": ("RotationInterval", "value"),
        "pending_window_in_days": ("PendingWindowInDays", "int"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_log_project": {
        "project_name": ("Name", "value"),
        "name": ("Name", "value"),
        "description": ("Description", "value"),
        "tags": ("Tags", "tag_list"),
    },
    "alicloud_log_store": {
        "project_name": ("ProjectName", "value"),
        "project": ("ProjectName", "value"),
        "logstore_name": ("LogstoreName", "value"),
        "name": ("LogstoreName", "value"),
        "retention_period": ("TTL", "int"),
        "shard_count": ("ShardCount", "int"),
        "auto_split": ("AutoSplit", "value"),
        "max_split_shard_count": ("MaxSplitShard", "int"),
        "append_meta": ("AppendMeta", "value"),
    },
    "alicloud_oss_bucket": {
        "bucket": ("BucketName", "value"),
        "acl": ("AccessControl", "value"),
        "storage_class": ("StorageClass", "value"),
        "tags": ("Tags", "tag_map"),
        "versioning": ("VersioningConfiguration", "camel_block"),
        "server_side_encryption_rule": ("ServerSideEncryptionConfiguration", "oss_sse"),
        "lifecycle_rule": ("LifecycleConfiguration", "oss_lifecycle"),
    },
}

# Types whose VpcId can be derived from the VSwitch they are placed in.
_VPC_FROM_VSWITCH = {"alicloud_instance", "alicloud_db_instance", "alicloud_kvstore_instance", "alicloud_slb_load_balancer",
                     "alicloud_mongodb_instance", "alicloud_polardb_cluster", "alicloud_cs_managed_kubernetes"}
_KNOWN_BLOCKS = frozenset({"data", "module", "provider", "terraform", "resource", "variable", "output", "locals"})
_META_UNSUPPORTED = ("count", "for_each")
_META_IGNORED = ("provisioner", "lifecycle", "connection", "provider", "timeouts")
_PARAM_TYPES = {"string": "String", "number": "Number", "bool": "Boolean", "list": "CommaDelimitedList",
                "set": "CommaDelimitedList", "tuple": "CommaDelimitedList", "map": "Json", "object": "Json"}


def _ros_properties(ros_type: str) -> frozenset[str]:
    """The properties a ROS type has: the rules' list, and the hand-written schema's for the catalog's types."""
    rule = ros_rule(ros_type)
    schema = RESOURCE_SCHEMAS.get(ros_type)
    return (rule.properties if rule is not None else frozenset()) | (frozenset(schema.properties) if schema else frozenset())


def convert(hcl_text: str) -> ConversionResult:
    """Convert Terraform HCL text to a ROS template; never raises, reports everything left out."""
    try:
        parsed = hcl2.loads(hcl_text)
    except Exception:  # noqa: BLE001 - any parser failure means "not HCL" to the caller
        return ConversionResult(template={}, text="", unconverted=["<input>: not valid HCL"])
    try:
        return _Converter(parsed).run()
    except Exception as exc:  # noqa: BLE001 - a converter bug must not take the caller down
        return ConversionResult(template={}, text="", unconverted=[f"<input>: conversion failed ({type(exc).__name__})"])


# ---------------------------------------------------------------- HCL value helpers


def _label(raw: str) -> str:
    """Strip the quotes python-hcl2 (v8) keeps around block labels."""
    return raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw


def _camel(name: str) -> str:
    """CamelCase an identifier ("web_server-1" → "WebServer1"), always starting with a letter."""
    parts = [p for p in re.split(r"[^0-9A-Za-z]+", name) if p]
    out = "".join(p[0].upper() + p[1:] for p in parts) or "Resource"
    return out if out[0].isalpha() else "R" + out


def _blocks(parsed: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """Top-level blocks of one kind as a list of dicts (python-hcl2 gives a list per kind)."""
    value = parsed.get(kind) or []
    return [b for b in value if isinstance(b, dict)] if isinstance(value, list) else [value]


def _body(block: Mapping[str, Any]) -> dict[str, Any]:
    """A block body without python-hcl2's bookkeeping keys."""
    return {k: v for k, v in block.items() if not k.startswith("__")}


def _unescape(text: str) -> str:
    """Undo HCL string escapes for the common sequences."""
    return re.sub(r'\\([\\"nt])', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def _heredoc(text: str) -> str:
    """The body of a heredoc as python-hcl2 keeps it ("<<-EOT\n...\nEOT"), with <<- indentation removed."""
    first, _, rest = text.partition("\n")
    marker = first[2:].lstrip("-").strip()
    lines = rest.split("\n")
    if lines and lines[-1].strip() == marker:
        lines = lines[:-1]
    if first.startswith("<<-"):
        indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
        cut = min(indents, default=0)
        lines = [line[cut:] for line in lines]
    return "\n".join(lines) + "\n"


def _split_template(text: str, escapes: bool = True) -> list[tuple[str, str]]:
    """Split a quoted HCL string body into ("lit", text) and ("expr", expression) parts."""
    unescape = _unescape if escapes else (lambda value: value)
    parts: list[tuple[str, str]] = []
    buf, i = "", 0
    while i < len(text):
        if text.startswith("$${", i) or text.startswith("%%{", i):
            buf, i = buf + text[i + 1 : i + 3], i + 3
        elif text.startswith("%{", i):
            raise _Unmappable("template directives (%{...}) are not supported")
        elif text.startswith("${", i):
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise _Unmappable("unterminated interpolation")
            if buf:
                parts.append(("lit", unescape(buf)))
            parts.append(("expr", text[i + 2 : j - 1].strip()))
            buf, i = "", j
        else:
            buf, i = buf + text[i], i + 1
    if buf or not parts:
        parts.append(("lit", unescape(buf)))
    return parts


# ---------------------------------------------------------------- converter


class _Converter:
    """One conversion run: collects resources, logical ids, parameters, warnings."""

    def __init__(self, parsed: Mapping[str, Any]) -> None:
        self.parsed = parsed
        self.converted: list[str] = []
        self.unconverted: list[str] = []
        self.warnings: list[str] = []
        self.params: dict[str, str] = {}  # var name -> parameter id
        self.ids: dict[str, str] = {}  # "type.name" -> logical id
        self.types: dict[str, str] = {}  # "type.name" -> canonical terraform type
        self.ros_types: dict[str, str] = {}  # "type.name" -> ROS type
        self.rules: dict[str, TerraformRule] = {}  # "type.name" -> rostran rule (types without a hand-written table)
        self.unmapped_types: set[str] = set()
        self.unmapped_properties: list[str] = []
        self.bodies: dict[str, dict[str, Any]] = {}
        self.known_tf: set[str] = set()  # every resource address seen (converted or not)
        self.locals: dict[str, Any] = {}
        self._local_stack: list[str] = []
        self._taken: set[str] = set()

    # -- orchestration

    def run(self) -> ConversionResult:
        """Convert every block kind and assemble the template."""
        template: dict[str, Any] = {"ROSTemplateFormatVersion": ROS_TEMPLATE_VERSION}
        self._note_other_blocks()
        self._collect_locals()
        parameters = self._parameters()
        self._collect_resources()
        resources = {self.ids[a]: self._resource(a) for a in list(self.ids)}
        resources = {k: v for k, v in resources.items() if v is not None}
        resources.update(self._activations(resources))
        outputs = self._outputs()
        if parameters:
            template["Parameters"] = parameters
        template["Resources"] = resources
        if outputs:
            template["Outputs"] = outputs
        text = yaml.dump(template, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        return ConversionResult(template, text, self.converted, self.unconverted, self.warnings,
                                sorted(self.unmapped_types), self.unmapped_properties)

    def _drop(self, address: str, key: str, reason: str, note: str | None = None) -> None:
        """Report an argument of a converted resource that is not in the template (a warning and a loss entry)."""
        self.warnings.append(note or f"{address}: property {key} was not converted ({reason})")
        self.unmapped_properties.append(f"{address}.{key}: {reason}")

    def _unique(self, wanted: str, suffix: str = "") -> str:
        """Reserve a logical id, disambiguating with a type suffix and then a counter."""
        first = [wanted, wanted + suffix] if suffix else [wanted]
        candidates = itertools.chain(first, (f"{wanted}{suffix}{n}" for n in itertools.count(2)))
        chosen = next(c for c in candidates if c not in self._taken)
        self._taken.add(chosen)
        return chosen

    def _note_other_blocks(self) -> None:
        """Report data sources, modules, providers and the terraform block as not converted."""
        for block in _blocks(self.parsed, "data"):
            for dtype, named in block.items():
                for name in (named if isinstance(named, dict) else {}):
                    self.unconverted.append(f"data.{_label(dtype)}.{_label(name)}: data sources are not supported")
        for block in _blocks(self.parsed, "module"):
            for name in block:
                if not name.startswith("__"):
                    self.unconverted.append(f"module.{_label(name)}: modules are not supported")
        for block in _blocks(self.parsed, "provider"):
            for name in block:
                if not name.startswith("__"):
                    self.warnings.append(f"provider.{_label(name)}: provider configuration is not part of a ROS template "
                                         "(region and credentials are chosen when the stack is created)")
        if self.parsed.get("terraform"):
            self.warnings.append("terraform: the terraform settings block has no ROS equivalent and was ignored")
        for kind in self.parsed:
            if not kind.startswith("__") and kind not in _KNOWN_BLOCKS:
                self.unconverted.append(f"{kind}: top-level block type not supported")

    def _collect_locals(self) -> None:
        """Remember locals so that references to them can be inlined."""
        for block in _blocks(self.parsed, "locals"):
            self.locals.update(_body(block))
        for name in self.locals:
            self.warnings.append(f"local.{name}: locals have no ROS equivalent; inlined where referenced")

    # -- parameters

    def _parameters(self) -> dict[str, Any]:
        """Convert variable blocks to ROS Parameters."""
        out: dict[str, Any] = {}
        for block in _blocks(self.parsed, "variable"):
            for raw_name, raw_body in block.items():
                if raw_name.startswith("__") or not isinstance(raw_body, dict):
                    continue
                name = _label(raw_name)
                pid = self._unique(_camel(name), "Param")
                self.params[name] = pid
                out[pid] = self._parameter(name, _body(raw_body))
        return out

    def _parameter(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """One ROS parameter from a variable body."""
        default = self._literal(body.get("default"))
        ros_type = self._param_type(body.get("type"), default)
        param: dict[str, Any] = {"Type": ros_type}
        if "default" in body and body["default"] is not None:
            if isinstance(default, _Unmappable):
                self.warnings.append(f"var.{name}: default is an expression and was not converted")
                self.unmapped_properties.append(f"var.{name}.default: an expression")
            elif ros_type == "CommaDelimitedList" and isinstance(default, list):
                param["Default"] = ",".join(str(v) for v in default)
            else:
                param["Default"] = default
        description = self._literal(body.get("description"))
        if isinstance(description, str):
            param["Description"] = description
        if body.get("sensitive") is True:
            param["NoEcho"] = True
        if body.get("validation"):
            self.warnings.append(f"var.{name}: validation rules were not converted")
            self.unmapped_properties.append(f"var.{name}.validation: no ROS equivalent")
        return param

    def _param_type(self, raw: Any, default: Any) -> str:
        """Map a Terraform type constraint (or, without one, the default's type) to a ROS parameter type."""
        if isinstance(raw, str):
            text = raw.strip().removeprefix("${").removesuffix("}").strip().strip('"')
            head = re.split(r"[(\s]", text, maxsplit=1)[0]
            if head in _PARAM_TYPES:
                return _PARAM_TYPES[head]
        if isinstance(default, bool):
            return "Boolean"
        if isinstance(default, int | float):
            return "Number"
        if isinstance(default, list):
            return "CommaDelimitedList"
        if isinstance(default, dict):
            return "Json"
        return "String"

    def _literal(self, raw: Any) -> Any:
        """A value with no references, or an _Unmappable instance when it has any."""
        try:
            return self._value(raw, where="")
        except _Unmappable as exc:
            return exc

    # -- resources

    def _collect_resources(self) -> None:
        """First pass: decide which resources convert and give each a logical id."""
        for block in _blocks(self.parsed, "resource"):
            for raw_type, named in block.items():
                if raw_type.startswith("__") or not isinstance(named, dict):
                    continue
                for raw_name, raw_body in named.items():
                    if raw_name.startswith("__") or not isinstance(raw_body, dict):
                        continue
                    self._collect_one(_label(raw_type), _label(raw_name), _body(raw_body))

    def _collect_one(self, tf_type: str, name: str, body: dict[str, Any]) -> None:
        """Register one resource block, or record why it is not converted."""
        address = f"{tf_type}.{name}"
        self.known_tf.add(address)
        canonical = _ALIASES.get(tf_type, tf_type)
        rule = None if canonical in TERRAFORM_TO_ROS else terraform_rule(tf_type)
        if canonical not in TERRAFORM_TO_ROS and rule is None:
            self.unconverted.append(f"{address}: resource type not supported")
            self.unmapped_types.add(tf_type)
            return
        meta = [m for m in _META_UNSUPPORTED if m in body]
        if meta:
            self.unconverted.append(f"{address}: {meta[0]} meta-argument not supported")
            return
        if canonical == "alicloud_security_group_rule" and _label(str(body.get("type", "ingress"))) != "ingress":
            self.unconverted.append(f"{address}: only ingress security group rules are supported")
            return
        if rule is not None:
            self.rules[address] = rule
        elif tf_type != canonical:
            self.warnings.append(f"{address}: deprecated type {tf_type} converted as {canonical}")
        self.types[address] = canonical
        self.ros_types[address] = rule.ros_type if rule is not None else TERRAFORM_TO_ROS[canonical]
        self.bodies[address] = body
        self.ids[address] = self._unique(_camel(name), _camel(self.ros_types[address].rsplit("::", 1)[-1]))

    def _resource(self, address: str) -> dict[str, Any] | None:
        """Second pass: build one ROS resource from its Terraform body."""
        tf_type, body = self.types[address], self.bodies[address]
        spec = _PROPERTIES.get(tf_type, {})
        rule = self.rules.get(address) or terraform_rule(tf_type)
        accepted = _ros_properties(self.ros_types[address])
        props: dict[str, Any] = {}
        for key, raw in body.items():
            if key in _META_IGNORED:
                self._drop(address, key, "Terraform meta-argument", note=f"{address}: {key} was not converted")
                continue
            if key == "depends_on":
                continue
            if key not in spec:
                by_rule = rule.properties.get(key) if rule is not None else None
                if by_rule is None or not by_rule.mapped:
                    self._drop(address, key, "no ROS mapping")
                elif by_rule.to is not None and by_rule.to.split(".")[0] not in accepted:
                    self._drop(address, key, f"the rules map it to {by_rule.to.split('.')[0]}, which "
                                             f"{self.ros_types[address]} does not have")
                elif raw is not None:
                    self._rule_property(address, key, by_rule, raw, props)
                continue
            ros_name, transform = spec[key]
            if transform == "skip" or raw is None:
                continue
            try:
                value = _TRANSFORMS[transform](self, self._value(raw, where=f"{address}.{key}"), f"{address}.{key}")
            except _Unmappable as exc:
                self._drop(address, key, str(exc))
                continue
            if ros_name:
                _put(props, ros_name, value)
        if tf_type == "alicloud_slb_listener":
            props.setdefault("Bandwidth", -1)  # the provider's default; ROS requires it
        if tf_type == "alicloud_nas_mount_target":
            props.setdefault("NetworkType", "Vpc" if "VSwitchId" in props else "Classic")  # implied by vswitch_id
        self._derive_vpc(address, tf_type, body, props)
        resource: dict[str, Any] = {"Type": self.ros_types[address], "Properties": props}
        depends = self._depends_on(address, body.get("depends_on"))
        if depends:
            resource["DependsOn"] = depends
        self.converted.append(address)
        return resource

    def _activations(self, resources: Mapping[str, Any]) -> dict[str, Any]:
        """A scaling configuration with ``active = true`` enables its group: ROS says so with its own resource."""
        extra: dict[str, Any] = {}
        for address, tf_type in self.types.items():
            logical = self.ids[address]
            if tf_type != "alicloud_ess_scaling_configuration" or logical not in resources:
                continue
            if _label(str(self.bodies[address].get("active", False))).lower() != "true":
                continue
            group = resources[logical]["Properties"].get("ScalingGroupId")
            if group is not None:
                extra[self._unique(f"{logical}Enable", "ScalingGroupEnable")] = {
                    "Type": "ALIYUN::ESS::ScalingGroupEnable",
                    "Properties": {"ScalingGroupId": group, "ScalingConfigurationId": {"Ref": logical}}}
        return extra

    def _derive_vpc(self, address: str, tf_type: str, body: Mapping[str, Any], props: dict[str, Any]) -> None:
        """Fill VpcId from the referenced vswitch's vpc_id when Terraform leaves it implicit."""
        if tf_type not in _VPC_FROM_VSWITCH or "VpcId" in props:
            return
        ref = props.get("VSwitchId")
        listed = props.get("VSwitchIds")
        if ref is None and isinstance(listed, list) and listed:
            ref = listed[0]  # every vSwitch of a cluster is in its one VPC
        if not (isinstance(ref, dict) and "Ref" in ref):
            return
        vswitch = next((a for a, lid in self.ids.items() if lid == ref["Ref"] and self.types[a] == "alicloud_vswitch"), None)
        if vswitch and self.bodies[vswitch].get("vpc_id") is not None:
            try:
                props["VpcId"] = self._value(self.bodies[vswitch]["vpc_id"], where=f"{address}.vswitch_id")
            except _Unmappable:
                self.warnings.append(f"{address}: VpcId could not be derived from {vswitch}")

    def _depends_on(self, address: str, raw: Any) -> list[str]:
        """Map depends_on entries to converted logical ids; report the rest."""
        out: list[str] = []
        for item in raw if isinstance(raw, list) else []:
            target = str(item).removeprefix("${").removesuffix("}").strip()
            if target in self.ids:
                out.append(self.ids[target])
            else:
                self._drop(address, "depends_on", f"{target} is not converted",
                           note=f"{address}: depends_on {target} was not converted")
        return out

    # -- arguments mapped by the rostran rules

    def _rule_property(self, address: str, key: str, rule: PropertyRule, raw: Any, props: dict[str, Any]) -> None:
        """Convert one argument the way the rules say: nested blocks field by field, then the rules' transform."""
        where = f"{address}.{key}"
        try:
            value = self._by_rule(rule, self._value(raw, where=where), address, key)
            if value is None:
                return
            if rule.to is None:  # a block whose fields become properties of the resource itself
                props.update(value)
            else:
                _put(props, rule.to, value)
        except _Unmappable as exc:
            self._drop(address, key, str(exc))

    def _by_rule(self, rule: PropertyRule, value: Any, address: str, path: str) -> Any:
        """A converted value shaped by one rule (a list of blocks, one block, or a plain value) and its transform."""
        if rule.kind == "List" and rule.schema:
            items = value if isinstance(value, list) else [value]
            if not all(isinstance(item, dict) for item in items):
                raise _Unmappable("expected nested blocks")
            value = [self._rule_fields(rule.schema, item, address, path) for item in items]
        elif rule.kind == "Map" and rule.schema:
            value = self._rule_fields(rule.schema, _single_block(value), address, path)
        elif rule.kind == "Map" and isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            value = value[0]
        if rule.handler is not None:
            handler = _RULE_HANDLERS.get(rule.handler)
            if handler is None:
                raise _Unmappable(f"the rules convert it with {rule.handler}, which is not available offline")
            value = handler(self, value, f"{address}.{path}")
        return value

    def _rule_fields(self, schema: Mapping[str, PropertyRule], block: Mapping[str, Any], address: str,
                     path: str) -> dict[str, Any]:
        """The fields of one nested block, each mapped by its rule; the fields without one are reported."""
        out: dict[str, Any] = {}
        for name, item in block.items():
            sub = schema.get(name)
            if sub is None or not sub.mapped:
                self._drop(address, f"{path}.{name}", "no ROS mapping")
                continue
            try:
                value = self._by_rule(sub, item, address, f"{path}.{name}")
                if value is None:
                    continue
                if sub.to is None:
                    out.update(value)
                else:
                    _put(out, sub.to, value)
            except _Unmappable as exc:
                self._drop(address, f"{path}.{name}", str(exc))
        return out

    # -- outputs

    def _outputs(self) -> dict[str, Any]:
        """Convert output blocks to ROS Outputs."""
        out: dict[str, Any] = {}
        taken: set[str] = set()
        for block in _blocks(self.parsed, "output"):
            for raw_name, raw_body in block.items():
                if raw_name.startswith("__") or not isinstance(raw_body, dict):
                    continue
                name, body = _label(raw_name), _body(raw_body)
                try:
                    value = self._value(body.get("value"), where=f"output.{name}")
                except _Unmappable as exc:
                    self.unconverted.append(f"output.{name}: {exc}")
                    continue
                key = _camel(name)
                while key in taken:
                    key += "Output"
                taken.add(key)
                entry: dict[str, Any] = {"Value": value}
                description = self._literal(body.get("description"))
                if isinstance(description, str):
                    entry["Description"] = description
                if body.get("sensitive") is True:
                    self.warnings.append(f"output.{name}: sensitive flag has no ROS output equivalent")
                out[key] = entry
                self.converted.append(f"output.{name}")
        return out

    # -- values and references

    def _value(self, raw: Any, where: str) -> Any:
        """Convert a python-hcl2 value (literal, quoted string, ${expr}, list, map, block list) to ROS."""
        if isinstance(raw, dict):
            return {_label(k): self._value(v, where) for k, v in raw.items() if not k.startswith("__")}
        if isinstance(raw, list):
            return [self._value(v, where) for v in raw]
        if not isinstance(raw, str):
            return raw
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            inner = raw[1:-1]
            if inner.startswith("<<"):
                return self._template_string(_heredoc(inner), where, escapes=False)
            return self._template_string(inner, where)
        if raw.startswith("${") and raw.endswith("}"):
            return self._expression(raw[2:-1].strip(), where)
        return raw

    def _template_string(self, text: str, where: str, escapes: bool = True) -> Any:
        """A quoted string or heredoc, possibly with interpolations (→ Fn::Join)."""
        parts = _split_template(text, escapes)
        if len(parts) == 1 and parts[0][0] == "lit":
            return parts[0][1]
        values: list[Any] = []
        for kind, part in parts:
            value = part if kind == "lit" else self._expression(part, where)
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, int | float):
                value = str(value)
            if isinstance(value, str) and values and isinstance(values[-1], str):
                values[-1] += value  # fold literals (e.g. inlined locals) so plain text stays plain
            elif value is not None:
                values.append(value)
        if not values:
            return ""
        if len(values) == 1:
            return values[0]
        return {"Fn::Join": ["", values]}

    def _expression(self, expr: str, where: str) -> Any:
        """Map a Terraform expression to Ref / Fn::GetAtt / a literal, or raise _Unmappable."""
        if expr in ("true", "false"):
            return expr == "true"
        if expr == "null":
            return None
        if re.fullmatch(r"-?\d+(\.\d+)?", expr):
            return float(expr) if "." in expr else int(expr)
        if re.fullmatch(r'"[^"$%\\]*"', expr):
            return expr[1:-1]
        match = re.fullmatch(r"var\.([A-Za-z_][\w-]*)", expr)
        if match:
            if match.group(1) not in self.params:
                raise _Unmappable(f"undeclared variable var.{match.group(1)}")
            return {"Ref": self.params[match.group(1)]}
        match = re.fullmatch(r"local\.([A-Za-z_][\w-]*)", expr)
        if match:
            return self._local(match.group(1), where)
        match = re.fullmatch(r"([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)", expr)
        if match and match.group(1) not in ("data", "module", "var", "local"):
            return self._reference(match.group(1), match.group(2), match.group(3))
        raise _Unmappable(f"expression `{expr}` cannot be mapped to ROS")

    def _local(self, name: str, where: str) -> Any:
        """Inline a local value (guarding against cycles)."""
        if name not in self.locals or name in self._local_stack:
            raise _Unmappable(f"local.{name} cannot be resolved")
        self._local_stack.append(name)
        try:
            return self._value(self.locals[name], where)
        finally:
            self._local_stack.pop()

    def _reference(self, tf_type: str, name: str, attribute: str) -> dict[str, Any]:
        """A resource attribute reference → Ref (id) or Fn::GetAtt."""
        address = f"{tf_type}.{name}"
        if address not in self.ids:
            reason = "is not converted" if address in self.known_tf else "is not declared"
            raise _Unmappable(f"referenced resource {address} {reason}")
        logical = self.ids[address]
        if attribute == "id":
            return {"Ref": logical}
        if address in self.rules:
            by_rule = self.rules[address].attributes.get(attribute)
            ros_attr = by_rule.to if by_rule is not None and not by_rule.ignored else None
        else:
            ros_attr = _ATTRIBUTES.get(self.types[address], {}).get(attribute)
        if ros_attr is None:
            raise _Unmappable(f"attribute {address}.{attribute} has no ROS equivalent")
        return {"Fn::GetAtt": [logical, ros_attr]}


# ---------------------------------------------------------------- property transforms


def _t_value(conv: _Converter, value: Any, where: str) -> Any:
    """Pass the converted value through unchanged."""
    return value


def _t_int(conv: _Converter, value: Any, where: str) -> Any:
    """Integer properties: Terraform often quotes numbers ("10"); ROS wants integers."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def _t_secret(conv: _Converter, value: Any, where: str) -> Any:
    """Passwords: keep them, but flag literals as hard-coded secrets."""
    if isinstance(value, str):
        conv.warnings.append(f"{where}: hard-coded secret; use a NoEcho parameter instead")
    return value


def _t_first(conv: _Converter, value: Any, where: str) -> Any:
    """security_groups list → first element (ROS SecurityGroupId takes one group)."""
    if not isinstance(value, list):
        return value
    if not value:
        raise _Unmappable("empty list")
    if len(value) > 1:
        conv.warnings.append(f"{where}: only the first of {len(value)} security groups was converted")
        conv.unmapped_properties.append(f"{where}: only the first of {len(value)} security groups")
    return value[0]


def _t_as_list(conv: _Converter, value: Any, where: str) -> Any:
    """A single value → one-element list (ROS SnatEntry takes SourceVSwitchIds, a list)."""
    return value if isinstance(value, list) else [value]


def _t_csv(conv: _Converter, value: Any, where: str) -> Any:
    """A list → comma-joined string (Fn::Join when it holds references)."""
    if not isinstance(value, list):
        return value
    if all(isinstance(v, str) for v in value):
        return ",".join(value)
    return {"Fn::Join": [",", value]}


def _t_tag_list(conv: _Converter, value: Any, where: str) -> Any:
    """Terraform tags map → ROS [{Key, Value}] list."""
    if not isinstance(value, dict):
        raise _Unmappable("tags must be a map")
    return [{"Key": k, "Value": _scalar_text(v)} for k, v in value.items()]


def _t_tag_map(conv: _Converter, value: Any, where: str) -> Any:
    """Terraform tags map → ROS map (OSS bucket and RDS tags are a map)."""
    if not isinstance(value, dict):
        raise _Unmappable("tags must be a map")
    return {k: _scalar_text(v) for k, v in value.items()}


def _scalar_text(value: Any) -> Any:
    """Tag values are strings in ROS: render numbers and booleans the way Terraform does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


def _mapped(table: Mapping[str, str]) -> Callable[[_Converter, Any, str], Any]:
    """A transform translating enumerated literal values through a table (references pass through)."""

    def transform(conv: _Converter, value: Any, where: str) -> Any:
        if isinstance(value, str):
            if value not in table:
                raise _Unmappable(f"value {value!r} has no ROS equivalent")
            return table[value]
        return value

    return transform


def _single_block(value: Any) -> dict[str, Any]:
    """A nested block as python-hcl2 gives it (list of one dict, or a dict)."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        return value[0]
    if isinstance(value, dict):
        return value
    raise _Unmappable("expected one nested block")


def _t_slb_pay(conv: _Converter, value: Any, where: str) -> Any:
    """ROS creates pay-as-you-go SLB instances and has no property to say otherwise: only that value converts."""
    if value in ("PayAsYouGo", "PostPaid"):
        return None
    raise _Unmappable(f"value {value!r}: ROS creates pay-as-you-go SLB instances only")


def _t_alb_billing(conv: _Converter, value: Any, where: str) -> Any:
    """load_balancer_billing_config { pay_type } → LoadBalancerBillingConfig {PayType}."""
    block = _single_block(value)
    return {"PayType": block["pay_type"]} if "pay_type" in block else {}


def _t_json_doc(conv: _Converter, value: Any, where: str) -> Any:
    """A policy document: a JSON string (a heredoc or a literal) becomes the mapping ROS wants."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            document = json.loads(value)
        except ValueError:
            raise _Unmappable("the policy document is not literal JSON (jsonencode() and references are not converted)") from None
        if isinstance(document, dict):
            return document
    raise _Unmappable("the policy document is not a JSON object")


def _put(props: dict[str, Any], path: str, value: Any) -> None:
    """Set a property by its dotted path: ``Code.OssBucketName`` nests a map, ``Servers.0.Port`` a list item."""
    parts = path.split(".")
    node: Any = props
    for part, following in zip(parts, parts[1:], strict=False):
        node = _step(node, part, [] if following.isdigit() else {})
    _step(node, parts[-1], value, replace=True)


def _step(node: Any, part: str, default: Any, replace: bool = False) -> Any:
    """One step of :func:`_put`: the child ``part`` of a map or list (created as ``default``, or set to it)."""
    if part.isdigit() and isinstance(node, list):
        index = int(part)
        while len(node) <= index:
            node.append({} if replace or isinstance(default, dict) else [])
        if replace or not isinstance(node[index], type(default)):
            node[index] = default
        return node[index]
    if isinstance(node, dict) and not part.isdigit():
        if replace:
            node[part] = default
        return node.setdefault(part, default)
    raise _Unmappable(f"its ROS path {part!r} does not fit the value already there")


def _t_fc_config(conv: _Converter, value: Any, where: str) -> Any:
    """An HTTP trigger's config JSON ({"authType", "methods"}) as ROS's TriggerConfig ({AuthType, Methods})."""
    document = _t_json_doc(conv, value, where)
    return {key[:1].upper() + key[1:]: item for key, item in document.items()}


def _t_lower(conv: _Converter, value: Any, where: str) -> Any:
    """Terraform spells some enums capitalised where ROS wants lower case ("Ipv4" → "ipv4")."""
    return value.lower() if isinstance(value, str) else value


def _t_alb_zones(conv: _Converter, value: Any, where: str) -> Any:
    """zone_mappings blocks → ZoneMappings [{ZoneId, VSwitchId}]."""
    blocks = value if isinstance(value, list) else [value]
    out = []
    for block in blocks:
        if not isinstance(block, dict):
            raise _Unmappable("zone_mappings must be blocks")
        out.append({"ZoneId": block.get("zone_id"), "VSwitchId": block.get("vswitch_id")})
    return out


def _t_slb_servers(conv: _Converter, value: Any, where: str) -> Any:
    """backend_servers blocks → BackendServers [{ServerId, Weight}]."""
    out = []
    for block in value if isinstance(value, list) else [value]:
        if not isinstance(block, dict) or "server_id" not in block:
            raise _Unmappable("backend_servers must be blocks with server_id")
        server = {"ServerId": block["server_id"], "Weight": _t_int(conv, block.get("weight", 100), where)}
        if "type" in block:
            server["Type"] = block["type"]
        out.append(server)
    return out


def _camel_keys(value: Any, lists: frozenset[str] = frozenset()) -> Any:
    """Nested snake_case blocks → CamelCase maps; a one-block list becomes a map unless its key is in ``lists``."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, list) and item and all(isinstance(v, dict) for v in item):
                items = [_camel_keys(v, lists) for v in item]
                out[_camel(key)] = items if key in lists or len(items) > 1 else items[0]
            else:
                out[_camel(key)] = _camel_keys(item, lists)
        return out
    if isinstance(value, list):
        return [_camel_keys(item, lists) for item in value]
    return value


def _t_camel_block(conv: _Converter, value: Any, where: str) -> Any:
    """One nested block (health_check_config { health_check_enabled = true }) → {HealthCheckEnabled: true}."""
    return _camel_keys(_single_block(value))


def _t_oss_sse(conv: _Converter, value: Any, where: str) -> Any:
    """server_side_encryption_rule { sse_algorithm, kms_master_key_id } → {SSEAlgorithm, KMSMasterKeyID}."""
    block = _single_block(value)
    out = {"SSEAlgorithm": block["sse_algorithm"]} if "sse_algorithm" in block else {}
    if "kms_master_key_id" in block:
        out["KMSMasterKeyID"] = block["kms_master_key_id"]
    return out


def _t_oss_lifecycle(conv: _Converter, value: Any, where: str) -> Any:
    """lifecycle_rule blocks → {Rule: [{ID, Prefix, Status, Expiration: {Days}}]} (expiration by days only)."""
    rules = []
    for block in value if isinstance(value, list) else [value]:
        if not isinstance(block, dict):
            raise _Unmappable("expected lifecycle_rule blocks")
        rule: dict[str, Any] = {"Prefix": block.get("prefix", ""),
                                "Status": "Enabled" if block.get("enabled", True) in (True, "true") else "Disabled"}
        if "id" in block:
            rule["ID"] = block["id"]
        if "expiration" in block:
            expiration = _single_block(block["expiration"])
            if "days" not in expiration:
                raise _Unmappable("only expiration by days has a ROS equivalent here")
            rule["Expiration"] = {"Days": expiration["days"]}
        rules.append(rule)
    return {"Rule": rules}


def _t_alb_actions(conv: _Converter, value: Any, where: str) -> Any:
    """default_actions blocks → DefaultActions [{Type, ForwardGroupConfig: {ServerGroupTuples: [{ServerGroupId}]}}]."""
    blocks = value if isinstance(value, list) else [value]
    if not all(isinstance(block, dict) for block in blocks):
        raise _Unmappable("default_actions must be blocks")
    return [_camel_keys(block, frozenset({"server_group_tuples"})) for block in blocks]


_TRANSFORMS: dict[str, Callable[[_Converter, Any, str], Any]] = {
    "value": _t_value,
    "int": _t_int,
    "secret": _t_secret,
    "first": _t_first,
    "csv": _t_csv,
    "as_list": _t_as_list,
    "tag_list": _t_tag_list,
    "tag_map": _t_tag_map,
    "pay": _mapped(_PAY_AS_YOU_GO),
    "slb_pay": _t_slb_pay,
    "slb_charge": _mapped(_SLB_CHARGE),
    "alb_billing": _t_alb_billing,
    "alb_zones": _t_alb_zones,
    "slb_servers": _t_slb_servers,
    "camel_block": _t_camel_block,
    "oss_sse": _t_oss_sse,
    "enabled_flag": _mapped({"Enabled": True, "Disabled": False}),
    "polardb_pay": _mapped({"PostPaid": "Postpaid", "PrePaid": "Prepaid"}),
    "lower": _t_lower,
    "json_doc": _t_json_doc,
    "fc_config": _t_fc_config,
    "oss_lifecycle": _t_oss_lifecycle,
    "alb_actions": _t_alb_actions,
}


# ---------------------------------------------------------------- the rules' value transforms
# rostran names a transform per argument; these are the ones that need no cloud call.


def _h_first(conv: _Converter, value: Any, where: str) -> Any:
    """A list where ROS takes one value: its first item (said in a warning), or Fn::Select on a reference."""
    if isinstance(value, list):
        if not value:
            return None
        if len(value) > 1:
            conv.warnings.append(f"{where}: only the first of {len(value)} values was converted")
            conv.unmapped_properties.append(f"{where}: only the first of {len(value)} values")
        return value[0]
    return {"Fn::Select": ["0", value]}


def _h_bool(conv: _Converter, value: Any, where: str) -> Any:
    """Booleans spelled as strings ("true") become booleans."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _h_json(conv: _Converter, value: Any, where: str) -> Any:
    """A JSON document given as a string becomes the structure ROS expects."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise _Unmappable("not literal JSON (jsonencode() and references are not converted)") from None
    if isinstance(value, dict | list):
        return value
    raise _Unmappable("not literal JSON")


def _h_parameters(conv: _Converter, value: Any, where: str) -> Any:
    """[{parameter_key, parameter_value}] blocks → {Key: Value} (a ROS stack's parameters)."""
    blocks = value if isinstance(value, list) else [value]
    if not all(isinstance(block, dict) and "parameter_key" in block for block in blocks):
        raise _Unmappable("expected parameter blocks with parameter_key")
    return {block["parameter_key"]: block.get("parameter_value") for block in blocks}


_RULE_HANDLERS: dict[str, Callable[[_Converter, Any, str], Any]] = {
    "tags_dict_to_list": _t_tag_list,
    "to_int": _t_int,
    "to_boolean": _h_bool,
    "json_load": _h_json,
    "select_first": _h_first,
    "comma_join": _t_csv,
    "ros_parameters": _h_parameters,
}
