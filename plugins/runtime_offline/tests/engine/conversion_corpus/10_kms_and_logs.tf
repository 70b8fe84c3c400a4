# A KMS key and a Log Service project with a logstore (no VPC).
resource "alicloud_kms_key" "data" {
  description            = "data key"
  key_usage              = "ENCRYPT/DECRYPT"
  automatic_rotation     = "Enabled"
  rotation_interval      = "180d"
  pending_window_in_days = 7
}

resource "alicloud_log_project" "audit" {
  project_name = "audit-logs"
  description  = "audit trail"
}

resource "alicloud_log_store" "events" {
  project_name     = alicloud_log_project.audit.project_name
  logstore_name    = "events"
  retention_period = 180
  shard_count      = 2
}

output "key_arn" {
  value = alicloud_kms_key.data.arn
}
