"""Pieces both renderers (ROS and Terraform) build the same way: DNS record names and RAM policy documents."""

from __future__ import annotations

from typing import Any

_SECOND_LEVEL = {"com.cn", "net.cn", "org.cn", "gov.cn", "edu.cn", "co.uk", "org.uk", "co.jp", "com.hk", "com.sg"}


def split_domain(name: str) -> tuple[str, str]:
    """("www", "example.com") for "www.example.com"; ("@", "example.com") for the apex."""
    labels = name.split(".")
    size = 3 if ".".join(labels[-2:]) in _SECOND_LEVEL else 2
    if len(labels) <= size:
        return "@", name
    return ".".join(labels[:-size]), ".".join(labels[-size:])


def ram_documents(ram: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The role's trust policy and (when access was asked for) its permission policy, as RAM policy documents."""
    trust = {"Version": "1", "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow",
                                            "Principal": {"Service": [ram["principal"]]}}]}
    if not ram.get("actions"):
        return trust, None
    resources = ["*"]
    if ram.get("bucket") and all(a.startswith("oss:") for a in ram["actions"]):
        resources = [f"acs:oss:*:*:{ram['bucket']}", f"acs:oss:*:*:{ram['bucket']}/*"]
    policy = {"Version": "1", "Statement": [{"Effect": "Allow", "Action": ram["actions"], "Resource": resources}]}
    return trust, policy
