# A NAS file system mounted in a vSwitch.
resource "alicloud_vpc" "vpc" {
  vpc_name   = "files"
  cidr_block = "10.9.0.0/16"
}

resource "alicloud_vswitch" "files" {
  vpc_id     = alicloud_vpc.vpc.id
  cidr_block = "10.9.1.0/24"
  zone_id    = "cn-hangzhou-h"
}

resource "alicloud_nas_file_system" "share" {
  protocol_type = "NFS"
  storage_type  = "Performance"
  encrypt_type  = 1
  description   = "share"
}

resource "alicloud_nas_mount_target" "share" {
  file_system_id    = alicloud_nas_file_system.share.id
  access_group_name = "DEFAULT_VPC_GROUP_NAME"
  vswitch_id        = alicloud_vswitch.files.id
}

output "mount_domain" {
  value = alicloud_nas_mount_target.share.mount_target_domain
}
