# A function with its service and an HTTP trigger (code in OSS).
resource "alicloud_fc_service" "api" {
  name        = "api"
  description = "public api"
}

resource "alicloud_fc_function" "hello" {
  service     = alicloud_fc_service.api.name
  name        = "hello"
  runtime     = "python3.10"
  handler     = "index.handler"
  memory_size = 256
  timeout     = 30
  oss_bucket  = "code-bucket"
  oss_key     = "hello.zip"
}

resource "alicloud_fc_trigger" "http" {
  service  = alicloud_fc_service.api.name
  function = alicloud_fc_function.hello.name
  name     = "http"
  type     = "http"
  config   = "{\"authType\": \"function\", \"methods\": [\"GET\"]}"
}
