# An ACK Pro cluster with a node pool in two vSwitches.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "k8s"
  cidr_block = "10.20.0.0/16"
}

resource "alicloud_vswitch" "a" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.20.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_vswitch" "b" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.20.2.0/24"
  zone_id    = "cn-hangzhou-i"
}

resource "alicloud_cs_managed_kubernetes" "k8s" {
  name                 = "prod"
  cluster_spec         = "ack.pro.small"
  vswitch_ids          = [alicloud_vswitch.a.id, alicloud_vswitch.b.id]
  pod_cidr             = "172.20.0.0/16"
  service_cidr         = "172.21.0.0/20"
  new_nat_gateway      = true
  slb_internet_enabled = false
}

resource "alicloud_cs_kubernetes_node_pool" "workers" {
  cluster_id     = alicloud_cs_managed_kubernetes.k8s.id
  node_pool_name = "workers"
  vswitch_ids    = [alicloud_vswitch.a.id, alicloud_vswitch.b.id]
  instance_types = ["ecs.g7.xlarge"]
  desired_size   = 3
}
