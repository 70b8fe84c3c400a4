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

variable "instance_password" {
  type      = string
  sensitive = true
}

resource "alicloud_instance" "web" {
  image_id                   = "aliyun_3_x64_20G_alibase_20240819.vhd"
  instance_type              = "ecs.g7.large"
  vswitch_id                 = alicloud_vswitch.missing.id
  security_groups            = [var.undeclared_sg]
  password                   = var.instance_password
  internet_max_bandwidth_out = 5

  data_disks {
    size      = 100
    category  = "cloud_essd"
    encrypted = true
  }

  data_disks {
    size     = 200
    category = "cloud_essd"
  }
}

resource "alicloud_kvstore_instance" "cache" {
  instance_class = "redis.master.small.default"
  engine_version = "5.0"
  security_ips   = ["10.0.0.0/8"]
  tags = {
    owner = "web-team"
  }
}

resource "alicloud_slb_listener" "http" {
  load_balancer_id = "lb-123"
  protocol         = "http"
  frontend_port    = 80
  backend_port     = 8080
  bandwidth        = -1
}
