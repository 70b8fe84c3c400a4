# RDS MySQL and Redis in a VPC.
variable "redis_password" {
  type      = string
  sensitive = true
}

variable "app_password" {
  type      = string
  sensitive = true
}

resource "alicloud_vpc" "vpc" {
  vpc_name   = "db-vpc"
  cidr_block = "10.2.0.0/16"
}

resource "alicloud_vswitch" "db" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.2.1.0/24"
  zone_id    = "cn-hangzhou-j"
}

resource "alicloud_db_instance" "mysql" {
  engine                   = "MySQL"
  engine_version           = "8.0"
  instance_type            = "mysql.n2.medium.1"
  instance_storage         = 50
  db_instance_storage_type = "cloud_essd"
  vswitch_id               = alicloud_vswitch.db.id
  security_ips             = ["10.2.0.0/16", "192.168.0.1"]
  instance_name            = "orders"
}

resource "alicloud_rds_account" "app" {
  db_instance_id   = alicloud_db_instance.mysql.id
  account_name     = "app"
  account_password = var.app_password
  account_type     = "Normal"
}

resource "alicloud_kvstore_instance" "cache" {
  db_instance_name = "cache"
  instance_class   = "redis.master.small.default"
  engine_version   = "7.0"
  vswitch_id       = alicloud_vswitch.db.id
  zone_id          = "cn-hangzhou-j"
  password         = var.redis_password
  security_ips     = ["10.2.0.0/16"]
}

output "mysql_connection" {
  value = alicloud_db_instance.mysql.connection_string
}

output "redis_host" {
  value = alicloud_kvstore_instance.cache.connection_domain
}
