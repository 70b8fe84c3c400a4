# An OSS bucket whose name is interpolated from a variable.
variable "prefix" {
  default = "acme"
}

resource "alicloud_oss_bucket" "logs" {
  bucket        = "${var.prefix}-logs"
  acl           = "private"
  storage_class = "Standard"
  tags = {
    team = "platform"
    cost = "shared"
  }
}

output "bucket_name" {
  value = alicloud_oss_bucket.logs.id
}

output "bucket_url" {
  value = "oss://${alicloud_oss_bucket.logs.bucket}/"
}

output "bucket_endpoint" {
  value = alicloud_oss_bucket.logs.extranet_endpoint
}
