# A VPC with one vSwitch, a security group and its rules.
resource "alicloud_vpc" "main" {
  vpc_name   = "demo-vpc"
  cidr_block = "172.16.0.0/12"
  tags = {
    env = "dev"
  }
}

resource "alicloud_vswitch" "web_a" {
  vpc_id       = alicloud_vpc.main.id
  cidr_block   = "172.16.1.0/24"
  zone_id      = "cn-hangzhou-i"
  vswitch_name = "web-a"
}

resource "alicloud_security_group" "web" {
  name   = "web-sg"
  vpc_id = alicloud_vpc.main.id
}

resource "alicloud_security_group_rule" "ssh" {
  type              = "ingress"
  ip_protocol       = "tcp"
  nic_type          = "intranet"
  policy            = "accept"
  port_range        = "22/22"
  priority          = 1
  security_group_id = alicloud_security_group.web.id
  cidr_ip           = "10.0.0.0/8"
}

resource "alicloud_security_group_rule" "all_out" {
  type              = "egress"
  ip_protocol       = "all"
  port_range        = "-1/-1"
  security_group_id = alicloud_security_group.web.id
  cidr_ip           = "0.0.0.0/0"
}

output "vpc_id" {
  value       = alicloud_vpc.main.id
  description = "The VPC"
}

output "route_table" {
  value = alicloud_vpc.main.route_table_id
}
