# MongoDB and PolarDB in one vSwitch.
variable "mongo_password" {
  type      = string
  sensitive = true
}

resource "alicloud_vpc" "vpc" {
  vpc_name   = "data-vpc"
  cidr_block = "10.8.0.0/16"
}

resource "alicloud_vswitch" "data" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.8.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_mongodb_instance" "docs" {
  engine_version      = "6.0"
  db_instance_class   = "dds.mongo.mid"
  db_instance_storage = 40
  vswitch_id          = alicloud_vswitch.data.id
  security_ip_list    = ["10.8.0.0/16"]
  account_password    = var.mongo_password
  name                = "docs"
}

resource "alicloud_polardb_cluster" "orders" {
  db_type       = "MySQL"
  db_version    = "8.0"
  db_node_class = "polar.mysql.x4.medium"
  pay_type      = "PostPaid"
  vswitch_id    = alicloud_vswitch.data.id
  security_ips  = ["10.8.0.0/16"]
  description   = "orders"
}

output "orders_endpoint" {
  value = alicloud_polardb_cluster.orders.connection_string
}
