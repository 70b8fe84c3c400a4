terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "~> 1.230"
    }
  }
}

provider "alicloud" {
  region = "cn-hangzhou"
}

resource "alicloud_oss_bucket" "public" {
  bucket = "example-public-bucket"
  acl    = "public-read"
  tags = {
    owner = "web-team"
  }
}

resource "alicloud_db_instance" "main" {
  engine           = "MySQL"
  engine_version   = "8.0"
  instance_type    = "mysql.n2.medium.1"
  instance_storage = 50
  security_ips     = ["10.0.0.0/8", "0.0.0.0/0"]
  tags = {
    owner = "data-team"
  }
}

resource "alicloud_db_backup_policy" "main" {
  instance_id             = alicloud_db_instance.main.id
  backup_retention_period = 3
}
