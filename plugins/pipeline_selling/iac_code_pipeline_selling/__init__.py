"""iac-code's ``selling`` pipeline: a requirement becomes candidate architectures, each with a template and
a monthly cost, the user picks one, it is deployed (or its template handed over), and the context continues
as normal chat. Events follow the product's pipeline-events wire format (``urn:iac-code:a2a:pipeline-events:v1``)."""
