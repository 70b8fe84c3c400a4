terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = ">= 1.200.0, < 2.0.0"
    }
  }
}

provider "alicloud" {
  region = "cn-shanghai"
}

variable "db_password" {
  type      = string
  sensitive = true
}

variable "redis_password" {
  type      = string
  sensitive = true
  default   = null
}

resource "alicloud_oss_bucket" "data" {
  bucket = "example-private-data"
  acl    = "private"
  tags = {
    owner = "data-team"
  }
}

resource "alicloud_oss_bucket_server_side_encryption" "data" {
  bucket        = alicloud_oss_bucket.data.bucket
  sse_algorithm = "AES256"
}

resource "alicloud_db_instance" "main" {
  engine              = "MySQL"
  engine_version      = "8.0"
  instance_type       = "mysql.n2.medium.1"
  instance_storage    = 50
  zone_id_slave_a     = "cn-hangzhou-i"
  security_ips        = ["192.168.0.0/16"]
  deletion_protection = true
  tags = {
    owner = "data-team"
  }
}

resource "alicloud_db_account" "app" {
  db_instance_id   = alicloud_db_instance.main.id
  account_name     = "app"
  account_password = var.db_password
}

resource "alicloud_db_backup_policy" "main" {
  instance_id             = alicloud_db_instance.main.id
  backup_retention_period = 14
}

resource "alicloud_kvstore_instance" "cache" {
  instance_class = "redis.master.small.default"
  engine_version = "5.0"
  security_ips   = ["192.168.0.0/16"]
  password       = var.redis_password
  tags = {
    owner = "data-team"
  }
}

output "db_connection" {
  value = alicloud_db_instance.main.connection_string
}
