# Everything here (except the VPC) has no faithful ROS equivalent (Milvus has no ROS mapping in the rostran rules).
terraform {
  required_providers {
    alicloud = {
      source = "aliyun/alicloud"
    }
  }
}

provider "alicloud" {
  region = "cn-hangzhou"
}

data "alicloud_zones" "default" {
  available_resource_creation = "VSwitch"
}

module "network" {
  source = "./modules/network"
}

resource "alicloud_vpc" "main" {
  vpc_name   = "main"
  cidr_block = "10.3.0.0/16"
}

resource "alicloud_vswitch" "from_data" {
  vpc_id     = alicloud_vpc.main.id
  cidr_block = "10.3.1.0/24"
  zone_id    = "cn-hangzhou-i"
  vswitch_name = "vsw-${data.alicloud_zones.default.zones[0].id}"
}

resource "alicloud_milvus_instance" "vectors" {
  zone_id = "cn-hangzhou-i"
}

resource "alicloud_instance" "many" {
  count         = 3
  image_id      = "img"
  instance_type = "ecs.g7.large"
}

resource "alicloud_oss_bucket" "each" {
  for_each = toset(["a", "b"])
  bucket   = each.key
}

resource "alicloud_security_group" "sg" {
  vpc_id      = alicloud_vpc.main.id
  name        = upper("sg")
  inner_access_policy = "Accept"
  provisioner "local-exec" {
    command = "echo created"
  }
}

resource "random_password" "pw" {
  length = 16
}

output "k8s_id" {
  value = alicloud_milvus_instance.vectors.id
}

output "module_out" {
  value = module.network.vpc_id
}
