# DNS records: an A record with a literal address and a CNAME.
resource "alicloud_alidns_record" "www" {
  domain_name = "example.com"
  rr          = "www"
  type        = "A"
  value       = "203.0.113.10"
  ttl         = 600
}

resource "alicloud_alidns_record" "docs" {
  domain_name = "example.com"
  rr          = "docs"
  type        = "CNAME"
  value       = "example.github.io"
}
