# NAT gateway with an EIP and an SNAT entry; an EIP bound to an instance.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "nat-vpc"
  cidr_block = "10.0.0.0/16"
}

resource "alicloud_vswitch" "vsw" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.0.1.0/24"
  zone_id    = "cn-shanghai-b"
}

resource "alicloud_nat_gateway" "nat" {
  vpc_id           = alicloud_vpc.vpc.id
  vswitch_id       = alicloud_vswitch.vsw.id
  nat_type         = "Enhanced"
  nat_gateway_name = "demo-nat"
}

resource "alicloud_eip_address" "eip" {
  address_name         = "nat-eip"
  bandwidth            = "10"
  internet_charge_type = "PayByTraffic"
  payment_type         = "PayAsYouGo"
  isp                  = "BGP"
}

resource "alicloud_eip_association" "nat_eip" {
  allocation_id = alicloud_eip_address.eip.id
  instance_id   = alicloud_nat_gateway.nat.id
}

resource "alicloud_snat_entry" "snat" {
  snat_table_id     = alicloud_nat_gateway.nat.snat_table_ids
  source_vswitch_id = alicloud_vswitch.vsw.id
  snat_ip           = alicloud_eip_address.eip.ip_address
}

resource "alicloud_eip" "legacy" {
  bandwidth            = 5
  internet_charge_type = "PayByBandwidth"
}

output "eip_address" {
  value = alicloud_eip_address.eip.ip_address
}
