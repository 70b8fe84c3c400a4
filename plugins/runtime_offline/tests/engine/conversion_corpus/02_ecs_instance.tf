# An ECS instance driven by variables of every type.
variable "instance_type" {
  type        = string
  default     = "ecs.g7.large"
  description = "ECS instance type"
}

variable "disk_size" {
  type    = number
  default = 40
}

variable "public" {
  type    = bool
  default = true
}

variable "zones" {
  type    = list(string)
  default = ["cn-hangzhou-i", "cn-hangzhou-j"]
}

variable "db_password" {
  type      = string
  sensitive = true
}

resource "alicloud_vpc" "vpc" {
  vpc_name   = "app"
  cidr_block = "192.168.0.0/16"
}

resource "alicloud_vswitch" "vsw" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "192.168.1.0/24"
  zone_id    = "cn-hangzhou-i"
}

resource "alicloud_security_group" "sg" {
  security_group_name = "app-sg"
  vpc_id              = alicloud_vpc.vpc.id
}

resource "alicloud_security_group" "sg2" {
  security_group_name = "extra-sg"
  vpc_id              = alicloud_vpc.vpc.id
}

resource "alicloud_instance" "web_server" {
  instance_name              = "web"
  image_id                   = "aliyun_3_x64_20G_alibase_20240528.vhd"
  instance_type              = var.instance_type
  vswitch_id                 = alicloud_vswitch.vsw.id
  security_groups            = [alicloud_security_group.sg.id, alicloud_security_group.sg2.id]
  system_disk_category       = "cloud_essd"
  system_disk_size           = var.disk_size
  internet_max_bandwidth_out = 10
  password                   = "Hard-Coded-Passw0rd"
  tags = {
    app = "web"
  }
}

resource "alicloud_instance" "worker" {
  image_id        = "aliyun_3_x64_20G_alibase_20240528.vhd"
  instance_type   = "ecs.g7.large"
  vswitch_id      = alicloud_vswitch.vsw.id
  security_groups = [alicloud_security_group.sg.id]
  password        = var.db_password
}

output "web_public_ip" {
  value = alicloud_instance.web_server.public_ip
}
