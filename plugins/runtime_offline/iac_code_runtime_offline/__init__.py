"""``agent-runtime: offline``: iac-code's deterministic IaC engine (generation, review, Terraform→ROS) and its tools."""
