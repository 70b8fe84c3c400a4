# A RAM role ECS can assume and a policy reading one bucket (documents as literal JSON).
resource "alicloud_ram_role" "reader" {
  role_name   = "reader"
  description = "reads reports"
  assume_role_policy_document = <<EOT
{"Version": "1", "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": ["ecs.aliyuncs.com"]}}]}
EOT
}

resource "alicloud_ram_policy" "reports" {
  policy_name     = "reports-read"
  policy_document = "{\"Version\": \"1\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": [\"oss:GetObject\"], \"Resource\": [\"acs:oss:*:*:reports/*\"]}]}"
}

output "role_arn" {
  value = alicloud_ram_role.reader.arn
}
