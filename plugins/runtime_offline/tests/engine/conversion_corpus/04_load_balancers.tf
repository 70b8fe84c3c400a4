# A classic SLB and an ALB across two zones.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "lb-vpc"
  cidr_block = "10.1.0.0/16"
}

resource "alicloud_vswitch" "a" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.1.1.0/24"
  zone_id    = "cn-beijing-h"
}

resource "alicloud_vswitch" "b" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.1.2.0/24"
  zone_id    = "cn-beijing-i"
}

resource "alicloud_slb_load_balancer" "slb" {
  load_balancer_name   = "classic"
  address_type         = "intranet"
  load_balancer_spec   = "slb.s2.small"
  vswitch_id           = alicloud_vswitch.a.id
  payment_type         = "PayAsYouGo"
  internet_charge_type = "PayByTraffic"
}

resource "alicloud_alb_load_balancer" "alb" {
  vpc_id                 = alicloud_vpc.vpc.id
  address_type           = "Internet"
  address_allocated_mode = "Fixed"
  load_balancer_name     = "alb-demo"
  load_balancer_edition  = "Standard"
  load_balancer_billing_config {
    pay_type = "PayAsYouGo"
  }
  zone_mappings {
    vswitch_id = alicloud_vswitch.a.id
    zone_id    = alicloud_vswitch.a.zone_id
  }
  zone_mappings {
    vswitch_id = alicloud_vswitch.b.id
    zone_id    = "cn-beijing-i"
  }
}

output "slb_address" {
  value = alicloud_slb_load_balancer.slb.address
}

output "alb_dns" {
  value = alicloud_alb_load_balancer.alb.dns_name
}
