terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "1.230.0"
    }
  }
}

provider "alicloud" {
  region     = "cn-hangzhou"
  access_key = "LTAI5tSup3rS3cretKeyId"
  secret_key = "Sup3rS3cretProviderSecretKey"
}

variable "db_password" {
  type    = string
  default = "Sup3rS3cret-VarDefault7"
}

resource "alicloud_db_instance" "main" {
  engine              = "MySQL"
  engine_version      = "8.0"
  instance_type       = "mysql.n2.medium.1"
  instance_storage    = 50
  security_ips        = ["10.0.0.0/8"]
  deletion_protection = true
  tags = {
    owner = "data-team"
  }
}

resource "alicloud_db_account" "app" {
  db_instance_id   = alicloud_db_instance.main.id
  account_name     = "app"
  account_password = "Sup3rS3cret-AccountPass3"
}

resource "alicloud_db_account" "admin" {
  db_instance_id   = alicloud_db_instance.main.id
  account_name     = "admin"
  account_password = var.db_password
}
