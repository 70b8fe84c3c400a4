terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = ">= 1.200.0"
    }
  }
}

provider "alicloud" {
}

resource "alicloud_vpc" "main" {
  vpc_name   = "main"
  cidr_block = "10.0.0.0/8"
  tags = {
    owner = "net-team"
  }
}
