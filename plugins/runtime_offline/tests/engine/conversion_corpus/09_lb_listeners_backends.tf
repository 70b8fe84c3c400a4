# Load balancer listeners and backend servers: an SLB and an ALB in front of two instances.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "web-vpc"
  cidr_block = "10.2.0.0/16"
}

resource "alicloud_vswitch" "a" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.2.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_vswitch" "b" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.2.2.0/24"
  zone_id    = "cn-hangzhou-i"
}

resource "alicloud_security_group" "sg" {
  vpc_id = alicloud_vpc.vpc.id
}

resource "alicloud_instance" "web1" {
  image_id        = "aliyun_3_x64_20G_alibase_20240819.vhd"
  instance_type   = "ecs.g7.large"
  vswitch_id      = alicloud_vswitch.a.id
  security_groups = [alicloud_security_group.sg.id]
}

resource "alicloud_instance" "web2" {
  image_id        = "aliyun_3_x64_20G_alibase_20240819.vhd"
  instance_type   = "ecs.g7.large"
  vswitch_id      = alicloud_vswitch.b.id
  security_groups = [alicloud_security_group.sg.id]
}

resource "alicloud_slb_load_balancer" "slb" {
  load_balancer_name = "web-slb"
  address_type       = "internet"
  load_balancer_spec = "slb.s1.small"
  vswitch_id         = alicloud_vswitch.a.id
}

resource "alicloud_slb_listener" "http" {
  load_balancer_id = alicloud_slb_load_balancer.slb.id
  frontend_port    = 80
  backend_port     = 8080
  protocol         = "http"
  bandwidth        = -1
}

resource "alicloud_slb_listener" "tcp" {
  load_balancer_id = alicloud_slb_load_balancer.slb.id
  frontend_port    = "443"
  backend_port     = 443
  protocol         = "tcp"
}

resource "alicloud_slb_backend_server" "web" {
  load_balancer_id = alicloud_slb_load_balancer.slb.id
  backend_servers {
    server_id = alicloud_instance.web1.id
    weight    = 100
  }
  backend_servers {
    server_id = alicloud_instance.web2.id
    weight    = "50"
  }
}

resource "alicloud_alb_load_balancer" "alb" {
  vpc_id                = alicloud_vpc.vpc.id
  address_type          = "Internet"
  load_balancer_edition = "Standard"
  load_balancer_billing_config {
    pay_type = "PayAsYouGo"
  }
  zone_mappings {
    vswitch_id = alicloud_vswitch.a.id
    zone_id    = alicloud_vswitch.a.zone_id
  }
  zone_mappings {
    vswitch_id = alicloud_vswitch.b.id
    zone_id    = alicloud_vswitch.b.zone_id
  }
}

resource "alicloud_alb_server_group" "web" {
  server_group_name = "web-sg"
  protocol          = "HTTP"
  vpc_id            = alicloud_vpc.vpc.id
  health_check_config {
    health_check_enabled = true
    health_check_path    = "/health"
  }
}

resource "alicloud_alb_listener" "http" {
  load_balancer_id  = alicloud_alb_load_balancer.alb.id
  listener_protocol = "HTTP"
  listener_port     = 80
  default_actions {
    type = "ForwardGroup"
    forward_group_config {
      server_group_tuples {
        server_group_id = alicloud_alb_server_group.web.id
      }
    }
  }
}

resource "alicloud_alb_server_group_server_attachment" "web1" {
  server_group_id = alicloud_alb_server_group.web.id
  server_id       = alicloud_instance.web1.id
  server_type     = "Ecs"
  port            = 80
  weight          = 100
}
