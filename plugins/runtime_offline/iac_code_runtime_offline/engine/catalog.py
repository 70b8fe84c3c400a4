"""The Alibaba Cloud resource types the engine generates, converts and validates.

One table shared by generation, conversion and the ROS schema check, so the
three always agree on what is supported.
"""

from __future__ import annotations

# building block -> (ROS type, Terraform alicloud resource type)
RESOURCE_TYPES: dict[str, tuple[str, str]] = {
    "vpc": ("ALIYUN::ECS::VPC", "alicloud_vpc"),
    "vswitch": ("ALIYUN::ECS::VSwitch", "alicloud_vswitch"),
    "security_group": ("ALIYUN::ECS::SecurityGroup", "alicloud_security_group"),
    "security_group_ingress": ("ALIYUN::ECS::SecurityGroupIngress", "alicloud_security_group_rule"),
    "ecs_instance": ("ALIYUN::ECS::Instance", "alicloud_instance"),
    "slb": ("ALIYUN::SLB::LoadBalancer", "alicloud_slb_load_balancer"),
    "slb_listener": ("ALIYUN::SLB::Listener", "alicloud_slb_listener"),
    "slb_backend": ("ALIYUN::SLB::BackendServerAttachment", "alicloud_slb_backend_server"),
    "alb": ("ALIYUN::ALB::LoadBalancer", "alicloud_alb_load_balancer"),
    "alb_server_group": ("ALIYUN::ALB::ServerGroup", "alicloud_alb_server_group"),
    "alb_listener": ("ALIYUN::ALB::Listener", "alicloud_alb_listener"),
    "alb_backend": ("ALIYUN::ALB::BackendServerAttachment", "alicloud_alb_server_group_server_attachment"),
    "nlb": ("ALIYUN::NLB::LoadBalancer", "alicloud_nlb_load_balancer"),
    "nlb_server_group": ("ALIYUN::NLB::ServerGroup", "alicloud_nlb_server_group"),
    "nlb_listener": ("ALIYUN::NLB::Listener", "alicloud_nlb_listener"),
    "nlb_backend": ("ALIYUN::NLB::BackendServerAttachment", "alicloud_nlb_server_group_server_attachment"),
    "nat_gateway": ("ALIYUN::VPC::NatGateway", "alicloud_nat_gateway"),
    "eip": ("ALIYUN::VPC::EIP", "alicloud_eip_address"),
    "eip_association": ("ALIYUN::VPC::EIPAssociation", "alicloud_eip_association"),
    "snat_entry": ("ALIYUN::VPC::SnatEntry", "alicloud_snat_entry"),
    "rds": ("ALIYUN::RDS::DBInstance", "alicloud_db_instance"),
    "rds_account": ("ALIYUN::RDS::Account", "alicloud_rds_account"),
    "redis": ("ALIYUN::REDIS::Instance", "alicloud_kvstore_instance"),
    # ROS sets a Redis whitelist with a resource of its own; Terraform with the instance's `security_ips`.
    "redis_whitelist": ("ALIYUN::REDIS::Whitelist", ""),
    "oss_bucket": ("ALIYUN::OSS::Bucket", "alicloud_oss_bucket"),
    "mongodb": ("ALIYUN::MONGODB::Instance", "alicloud_mongodb_instance"),
    "polardb": ("ALIYUN::POLARDB::DBCluster", "alicloud_polardb_cluster"),
    "nas_file_system": ("ALIYUN::NAS::FileSystem", "alicloud_nas_file_system"),
    "nas_mount_target": ("ALIYUN::NAS::MountTarget", "alicloud_nas_mount_target"),
    "ram_role": ("ALIYUN::RAM::Role", "alicloud_ram_role"),
    "ram_policy": ("ALIYUN::RAM::ManagedPolicy", "alicloud_ram_policy"),
    "fc_service": ("ALIYUN::FC::Service", "alicloud_fc_service"),
    "fc_function": ("ALIYUN::FC::Function", "alicloud_fc_function"),
    "fc_trigger": ("ALIYUN::FC::Trigger", "alicloud_fc_trigger"),
    "ack_cluster": ("ALIYUN::CS::ManagedKubernetesCluster", "alicloud_cs_managed_kubernetes"),
    "ack_node_pool": ("ALIYUN::CS::ClusterNodePool", "alicloud_cs_kubernetes_node_pool"),
    "ess_scaling_group": ("ALIYUN::ESS::ScalingGroup", "alicloud_ess_scaling_group"),
    "ess_scaling_configuration": ("ALIYUN::ESS::ScalingConfiguration", "alicloud_ess_scaling_configuration"),
    # Terraform activates a group with the configuration's `active = true`: this one has no twin there.
    "ess_enable": ("ALIYUN::ESS::ScalingGroupEnable", ""),
    "kms_key": ("ALIYUN::KMS::Key", "alicloud_kms_key"),
    "dns_record": ("ALIYUN::DNS::DomainRecord", "alicloud_alidns_record"),
    "sls_project": ("ALIYUN::SLS::Project", "alicloud_log_project"),
    "sls_logstore": ("ALIYUN::SLS::Logstore", "alicloud_log_store"),
}

ROS_TYPES = frozenset(ros for ros, _ in RESOURCE_TYPES.values())
TERRAFORM_TO_ROS = {tf: ros for ros, tf in RESOURCE_TYPES.values() if tf}
ROS_TEMPLATE_VERSION = "2015-09-01"
TERRAFORM_PROVIDER_VERSION = "1.230.0"  # pinned alicloud provider version for generated Terraform
