terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "~> 1.230"
    }
  }
}

provider "alicloud" {
  region = var.region
}

variable "region" {
  type    = string
  default = "cn-hangzhou"
}

variable "instance_password" {
  type      = string
  sensitive = true
}

locals {
  tags = {
    owner = "web-team"
  }
}

data "alicloud_zones" "default" {
  available_resource_creation = "VSwitch"
}

resource "alicloud_vpc" "main" {
  vpc_name   = "main"
  cidr_block = "192.168.0.0/16"
  tags       = local.tags
}

resource "alicloud_vswitch" "web" {
  vpc_id     = alicloud_vpc.main.id
  cidr_block = "192.168.1.0/24"
  zone_id    = data.alicloud_zones.default.zones[0].id
  tags       = local.tags
}

resource "alicloud_security_group" "web" {
  security_group_name = "web-${var.region}"
  vpc_id              = alicloud_vpc.main.id
  tags                = local.tags
}

resource "alicloud_security_group_rule" "https" {
  type              = "ingress"
  ip_protocol       = "tcp"
  port_range        = "443/443"
  cidr_ip           = "0.0.0.0/0"
  security_group_id = alicloud_security_group.web.id
}

resource "alicloud_security_group_rule" "ssh_from_office" {
  type              = "ingress"
  ip_protocol       = "tcp"
  port_range        = "22/22"
  cidr_ip           = "10.0.0.0/8"
  security_group_id = alicloud_security_group.web.id
}

resource "alicloud_instance" "web" {
  image_id                   = "aliyun_3_x64_20G_alibase_20240819.vhd"
  instance_type              = "ecs.g7.large"
  vswitch_id                 = alicloud_vswitch.web.id
  security_groups            = [alicloud_security_group.web.id]
  password                   = var.instance_password
  internet_max_bandwidth_out = 0
  tags                       = local.tags

  data_disks {
    size      = 100
    category  = "cloud_essd"
    encrypted = true
  }
}

output "instance_ip" {
  value = alicloud_instance.web.private_ip
}
