# Name collisions, locals, depends_on and references between resources.
locals {
  cidr   = "10.9.0.0/16"
  prefix = "ref"
  name   = "${local.prefix}-vpc"
}

resource "alicloud_vpc" "main" {
  vpc_name   = local.name
  cidr_block = local.cidr
}

resource "alicloud_vswitch" "main" {
  vpc_id     = alicloud_vpc.main.id
  cidr_block = "10.9.1.0/24"
  zone_id    = "cn-hangzhou-k"
}

resource "alicloud_security_group" "main" {
  vpc_id     = alicloud_vpc.main.id
  depends_on = [alicloud_vswitch.main]
}

resource "alicloud_instance" "app" {
  image_id        = "img-1"
  instance_type   = "ecs.c7.large"
  vswitch_id      = alicloud_vswitch.main.id
  security_groups = [alicloud_security_group.main.id]
  instance_name   = "${local.prefix}-app-${alicloud_vswitch.main.zone_id}"
  depends_on      = [alicloud_security_group.main, alicloud_cs_cluster.missing]
}

output "app_private_ip" {
  value = alicloud_instance.app.private_ip
}

output "vswitch_zone" {
  value = alicloud_vswitch.main.zone_id
}
