# An auto scaling group and its configuration.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "asg"
  cidr_block = "10.30.0.0/16"
}

resource "alicloud_vswitch" "a" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.30.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_security_group" "web" {
  vpc_id = alicloud_vpc.vpc.id
}

resource "alicloud_ess_scaling_group" "web" {
  scaling_group_name = "web"
  min_size           = 2
  max_size           = 8
  vswitch_ids        = [alicloud_vswitch.a.id]
}

resource "alicloud_ess_scaling_configuration" "web" {
  scaling_group_id  = alicloud_ess_scaling_group.web.id
  image_id          = "aliyun_3_x64_20G_alibase_20240819.vhd"
  instance_type     = "ecs.g7.large"
  security_group_id = alicloud_security_group.web.id
  active            = true
}
