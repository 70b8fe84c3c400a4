terraform {
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = "1.230.0"
    }
  }
}

provider "alicloud" {
  region = "cn-hangzhou"
}

resource "alicloud_kms_key" "data" {
  description = "data key"
  tags = {
    team = "data"
  }
}

resource "alicloud_log_project" "audit" {
  project_name = "audit-logs"
  tags = {
    team = "data"
  }
}

resource "alicloud_log_store" "events" {
  project_name     = alicloud_log_project.audit.project_name
  logstore_name    = "events"
  retention_period = 3
}
