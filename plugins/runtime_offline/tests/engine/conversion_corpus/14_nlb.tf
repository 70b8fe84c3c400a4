# An NLB in two zones with a TCP listener and one instance attached.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "nlb"
  cidr_block = "10.10.0.0/16"
}

resource "alicloud_vswitch" "a" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.10.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_vswitch" "b" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.10.2.0/24"
  zone_id    = "cn-hangzhou-i"
}

resource "alicloud_nlb_load_balancer" "nlb" {
  load_balancer_name = "edge"
  load_balancer_type = "Network"
  address_type       = "Internet"
  address_ip_version = "Ipv4"
  vpc_id             = alicloud_vpc.vpc.id
  zone_mappings {
    vswitch_id = alicloud_vswitch.a.id
    zone_id    = alicloud_vswitch.a.zone_id
  }
  zone_mappings {
    vswitch_id = alicloud_vswitch.b.id
    zone_id    = alicloud_vswitch.b.zone_id
  }
}

resource "alicloud_nlb_server_group" "tcp" {
  server_group_name = "tcp"
  server_group_type = "Instance"
  vpc_id            = alicloud_vpc.vpc.id
  protocol          = "TCP"
  health_check {
    health_check_enabled = true
  }
}

resource "alicloud_nlb_listener" "tcp_80" {
  listener_protocol = "TCP"
  listener_port     = 80
  load_balancer_id  = alicloud_nlb_load_balancer.nlb.id
  server_group_id   = alicloud_nlb_server_group.tcp.id
}

resource "alicloud_nlb_server_group_server_attachment" "web" {
  server_group_id = alicloud_nlb_server_group.tcp.id
  server_id       = "i-bp1example"
  server_type     = "Ecs"
  port            = 80
  weight          = 100
}

output "nlb_dns" {
  value = alicloud_nlb_load_balancer.nlb.dns_name
}
