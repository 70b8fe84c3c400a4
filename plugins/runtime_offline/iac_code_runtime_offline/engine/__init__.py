"""The embedded, deterministic IaC engine behind the offline runtime.

Pure functions over text and dicts (no A2A, no I/O except where a module says
so): generation of ROS/Terraform from requests, review, Terraform→ROS
conversion, and the Alibaba Cloud ROS API client.
"""
