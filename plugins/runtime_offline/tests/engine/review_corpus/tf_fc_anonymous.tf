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

resource "alicloud_fc_service" "api" {
  name = "api"
  tags = {
    team = "web"
  }
}

resource "alicloud_fc_function" "hello" {
  service = alicloud_fc_service.api.name
  name    = "hello"
  runtime = "python3.10"
  handler = "index.handler"
}

resource "alicloud_fc_trigger" "http" {
  service  = alicloud_fc_service.api.name
  function = alicloud_fc_function.hello.name
  name     = "http"
  type     = "http"
  config   = "{\"authType\": \"anonymous\", \"methods\": [\"GET\"]}"
}
