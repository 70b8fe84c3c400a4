"""Offline, deterministic review of ROS templates and Terraform configurations.

`review(text)` detects the format (ROS YAML/JSON or Terraform HCL), runs a fixed
set of security and hygiene rules and returns a `ReviewReport`. No LLM, no
network, no I/O: the same text always yields the same findings, in the same order.

Findings never echo secret values: a rule that spots a hard-coded password says
"a literal password", never the password itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from iac_code_runtime_offline.engine.catalog import ROS_TEMPLATE_VERSION, ROS_TYPES

__all__ = ["RULES", "Finding", "ReviewReport", "Rule", "review"]

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Rule:
    """One review rule: a stable id, a short name, its fixed severity and what it checks."""

    rule_id: str
    name: str
    severity: str
    summary: str


_RULE_LIST = [
    Rule("IAC000", "parse_error", "error", "The input is not a parseable ROS template or Terraform configuration."),
    Rule("IAC001", "open_admin_port", "error", "Ingress from 0.0.0.0/0 or ::/0 to SSH (22) or RDP (3389)."),
    Rule("IAC002", "open_all_ports", "error", "Ingress from 0.0.0.0/0 or ::/0 to all ports (protocol all, -1/-1 or 1/65535)."),
    Rule("IAC003", "literal_password", "error", "A password property/argument is a literal value in the template."),
    Rule(
        "IAC004", "secret_input_not_masked", "warning", "A password/secret parameter lacks NoEcho (ROS) or sensitive (Terraform)."
    ),
    Rule("IAC005", "secret_input_default", "error", "A password/secret parameter or variable has a default value."),
    Rule("IAC006", "literal_access_key", "error", "An AccessKey id/secret is hard-coded (provider block or resource property)."),
    Rule("IAC007", "oss_public_acl", "error", "OSS bucket ACL is public-read or public-read-write."),
    Rule("IAC008", "oss_no_encryption", "warning", "OSS bucket without server-side encryption."),
    Rule("IAC009", "rds_no_deletion_protection", "warning", "RDS instance without deletion protection enabled."),
    Rule("IAC010", "rds_short_backup_retention", "warning", "RDS backup retention explicitly set below 7 days."),
    Rule("IAC011", "db_allowlist_open", "error", "RDS/Redis IP allow-list contains 0.0.0.0/0."),
    Rule("IAC012", "redis_no_password", "warning", "Redis instance without a password."),
    Rule("IAC013", "disk_not_encrypted", "warning", "Data disk without encryption."),
    Rule("IAC014", "ecs_public_bandwidth", "info", "ECS instance gets a public IP (outbound internet bandwidth > 0)."),
    Rule("IAC015", "missing_tags", "warning", "Taggable resource without tags."),
    Rule("IAC016", "provider_unpinned", "warning", "alicloud provider version missing or only lower-bounded (>=)."),
    Rule("IAC017", "provider_no_region", "info", "alicloud provider has no explicit region."),
    Rule("IAC018", "unused_parameter", "warning", "ROS parameter never referenced."),
    Rule("IAC019", "dangling_reference", "error", "Ref/Fn::GetAtt (ROS) or expression (Terraform) names something undeclared."),
    Rule("IAC020", "invalid_resource_type", "error", "ROS resource type missing, malformed or with an unknown service prefix."),
    Rule("IAC021", "unsupported_resource_type", "info", "Well-formed ROS resource type the engine's catalog does not cover."),
    Rule("IAC022", "template_version", "error", "ROSTemplateFormatVersion missing or not 2015-09-01."),
    Rule("IAC023", "slb_http_only", "info", "SLB listens on HTTP port 80 and no HTTPS listener exists."),
    Rule("IAC024", "kms_no_rotation", "warning", "KMS key without automatic key rotation."),
    Rule("IAC025", "log_short_retention", "warning", "Log Service logstore keeps logs for fewer than 30 days."),
    Rule("IAC026", "nas_not_encrypted", "warning", "NAS file system without encryption at rest."),
    Rule("IAC030", "db_single_zone", "info", "RDS instance in a single zone (no standby zone)."),
    Rule("IAC029", "ack_public_api", "warning", "ACK cluster API server reachable from the internet."),
    Rule("IAC028", "fc_anonymous_http", "warning", "Function Compute HTTP trigger callable anonymously."),
    Rule("IAC027", "ram_admin_policy", "error", "RAM policy allows every action (\"*\") or every action of a service on \"*\"."),
]
RULES: dict[str, Rule] = {rule.rule_id: rule for rule in _RULE_LIST}


@dataclass(frozen=True)
class Finding:
    """One problem found: which rule, how bad, where exactly, what is wrong and how to fix it."""

    rule_id: str
    severity: str
    location: str
    message: str
    fix: str

    def to_json(self) -> dict[str, str]:
        """The finding with camelCase keys, as the JSON report carries it."""
        return {
            "ruleId": self.rule_id,
            "severity": self.severity,
            "location": self.location,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class ReviewReport:
    """The result of a review: the detected format and the sorted findings."""

    format: str
    findings: list[Finding] = field(default_factory=list)

    def count(self, severity: str) -> int:
        """How many findings have this severity."""
        return sum(1 for f in self.findings if f.severity == severity)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: format, summary counts and the findings (camelCase keys)."""
        return {
            "format": self.format,
            "summary": {"errors": self.count("error"), "warnings": self.count("warning"), "infos": self.count("info")},
            "findings": [f.to_json() for f in self.findings],
        }

    def to_text(self) -> str:
        """A readable English report: a headline with counts, then one block per finding."""
        kind = {"ros": "ROS template", "terraform": "Terraform configuration"}.get(self.format, "input of unknown format")
        if not self.findings:
            return f"Review of {kind}: no findings."
        errors, warnings, infos = self.count("error"), self.count("warning"), self.count("info")
        lines = [f"Review of {kind}: {_plural(errors, 'error')}, {_plural(warnings, 'warning')}, {_plural(infos, 'info')}."]
        for f in self.findings:
            lines += ["", f"[{f.severity.upper()}] {f.rule_id} at {f.location}", f"  Problem: {f.message}", f"  Fix: {f.fix}"]
        return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _finding(rule_id: str, location: str, message: str, fix: str) -> Finding:
    """Build a finding whose severity always comes from the rule table, so it stays stable."""
    return Finding(rule_id, RULES[rule_id].severity, location, message, fix)


def _sorted(findings: list[Finding]) -> list[Finding]:
    """Sort by severity (error first), then location, then rule id; drop exact duplicates."""
    unique = set(findings)
    return sorted(unique, key=lambda f: (SEVERITY_ORDER[f.severity], f.location, f.rule_id, f.message))


def review(text: str, filename: str | None = None) -> ReviewReport:
    """Review a ROS template or Terraform configuration; never raises on bad input.

    `filename` only steers format detection (".tf" → Terraform; ".json/.yaml/.yml" → ROS).
    """
    try:
        fmt, doc = _parse(text, filename)
    except _ParseError as exc:
        return ReviewReport("unknown", [_finding("IAC000", "<input>", str(exc), _PARSE_FIX)])
    except Exception as exc:  # e.g. RecursionError on absurdly nested input: still a report, never a crash
        msg = f"The input could not be parsed ({type(exc).__name__})."
        return ReviewReport("unknown", [_finding("IAC000", "<input>", msg, _PARSE_FIX)])
    try:
        findings = _review_ros(doc) if fmt == "ros" else _review_terraform(_TfDoc.from_raw(doc))
    except Exception as exc:  # a rule must never crash the caller; report the input as unreviewable
        msg = f"The input could not be reviewed ({type(exc).__name__})."
        return ReviewReport(fmt, [_finding("IAC000", "<input>", msg, _PARSE_FIX)])
    return ReviewReport(fmt, _sorted(findings))


# --------------------------------------------------------------------------- parsing

_PARSE_FIX = "Provide a valid ROS template (YAML or JSON with ROSTemplateFormatVersion) or Terraform HCL."


class _ParseError(Exception):
    """The text is neither a ROS template nor a Terraform configuration."""


class _RosLoader(yaml.SafeLoader):
    """SafeLoader that keeps dates as strings and maps ROS short-form tags (!Ref, !GetAtt...) to long form."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_RosLoader.add_multi_constructor("!", _construct_tag)
_RosLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"] for k, v in _RosLoader.yaml_implicit_resolvers.items()
}

_TF_TOP_KEYS = {"terraform", "provider", "resource", "data", "variable", "output", "locals", "module"}


def _parse(text: str, filename: str | None) -> tuple[str, Any]:
    """Detect the format and return ("ros", dict) or ("terraform", raw hcl2 dict)."""
    if not text.strip():
        raise _ParseError("The input is empty.")
    name = (filename or "").lower()
    if name.endswith(".tf"):
        return "terraform", _parse_hcl(text)
    ros_error: str | None = None
    try:
        doc = _parse_ros_text(text)
        if _looks_like_ros(doc):
            return "ros", doc
    except _ParseError as exc:
        ros_error = str(exc)
    if name.endswith((".json", ".yaml", ".yml", ".template")):
        raise _ParseError(ros_error or "The document is not a ROS template (no ROSTemplateFormatVersion or ALIYUN:: resources).")
    try:
        return "terraform", _parse_hcl(text)
    except _ParseError:
        raise _ParseError("The input is neither a ROS template (YAML/JSON) nor Terraform HCL that could be parsed.") from None


def _parse_ros_text(text: str) -> Any:
    """Parse JSON (when it starts with '{') or YAML; errors name only the position, not the content."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise _ParseError(f"Invalid JSON at line {exc.lineno}, column {exc.colno}.") from None
    try:
        return yaml.load(text, Loader=_RosLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _ParseError(f"Invalid YAML{where}.") from None


def _looks_like_ros(doc: Any) -> bool:
    """A ROS template has ROSTemplateFormatVersion or at least one ALIYUN::/DATASOURCE:: resource."""
    if not isinstance(doc, dict):
        return False
    if "ROSTemplateFormatVersion" in doc:
        return True
    resources = doc.get("Resources")
    if not isinstance(resources, dict):
        return False
    return any(
        isinstance(r, dict) and isinstance(r.get("Type"), str) and r["Type"].startswith(("ALIYUN::", "DATASOURCE::"))
        for r in resources.values()
    )


def _parse_hcl(text: str) -> dict[str, Any]:
    """Parse Terraform HCL with python-hcl2; any parser failure becomes a _ParseError."""
    import hcl2

    try:
        raw = hcl2.loads(text)
    except Exception as exc:
        line = getattr(exc, "line", None)
        where = f" at line {line}" if isinstance(line, int) and line > 0 else ""
        raise _ParseError(f"Invalid Terraform HCL{where}.") from None
    if not isinstance(raw, dict) or not (set(raw) & _TF_TOP_KEYS):
        raise _ParseError("The input has no Terraform blocks (terraform, provider, resource, variable...).")
    return raw


# --------------------------------------------------------------------------- shared helpers

_OPEN_CIDRS = {"0.0.0.0/0", "::/0", "0.0.0.0"}
_SECRET_NAME = re.compile(r"pass(word|wd)|secret|access_?key", re.IGNORECASE)
_ADMIN_PORTS = {22: "SSH", 3389: "RDP"}


def _truthy(value: Any) -> bool:
    """True for boolean true and the strings "true"/"True" (ROS and HCL accept both)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _as_int(value: Any) -> int | None:
    """An integer from an int or a numeric string literal; None for anything else (refs, functions)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value.strip())
    return None


def _port_range(value: Any) -> tuple[int, int] | None:
    """Parse "22/22" or "-1/-1"; None when absent or not a literal range."""
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"\s*(-?\d+)\s*/\s*(-?\d+)\s*", value)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _ingress_findings(location: str, protocol: Any, port_range: Any, cidrs: list[Any], policy: Any) -> list[Finding]:
    """IAC001/IAC002 for one ingress rule; ICMP/GRE and drop rules are not port exposures."""
    if isinstance(policy, str) and policy.lower() == "drop":
        return []
    if not any(isinstance(c, str) and c.strip() in _OPEN_CIDRS for c in cidrs):
        return []
    proto = protocol.lower() if isinstance(protocol, str) else ""
    if proto in {"icmp", "icmpv6", "gre"}:
        return []
    ports = _port_range(port_range)
    all_ports = proto == "all" or (ports is not None and (ports == (-1, -1) or (ports[0] <= 1 and ports[1] >= 65535)))
    if all_ports:
        return [
            _finding(
                "IAC002",
                location,
                "Ingress rule opens all ports to the whole internet (0.0.0.0/0 or ::/0).",
                "Restrict the source CIDR to known networks and open only the specific ports the service needs.",
            )
        ]
    if ports is None:
        return []
    exposed = [name for port, name in _ADMIN_PORTS.items() if ports[0] <= port <= ports[1]]
    if not exposed:
        return []
    what = " and ".join(f"{name} ({port})" for port, name in _ADMIN_PORTS.items() if name in exposed)
    return [
        _finding(
            "IAC001",
            location,
            f"Ingress rule exposes {what} to the whole internet (0.0.0.0/0 or ::/0).",
            "Limit the source CIDR to your office/VPN range or a bastion host instead of opening admin ports to the internet.",
        )
    ]


def _open_allowlist(entries: list[str], location: str, what: str) -> list[Finding]:
    """IAC011 when an allow-list contains 0.0.0.0/0."""
    if not any(e.strip() in _OPEN_CIDRS for e in entries):
        return []
    return [
        _finding(
            "IAC011",
            location,
            f"The {what} IP allow-list contains 0.0.0.0/0, so any internet address may connect.",
            "Replace 0.0.0.0/0 with the private CIDRs of the VPC/vSwitches (or specific addresses) that need access.",
        )
    ]


def _split_ips(value: Any) -> list[str]:
    """Allow-list entries from a comma-separated string or a list of literals."""
    if isinstance(value, str):
        return [p for p in value.split(",") if p.strip()]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


# --------------------------------------------------------------------------- ROS

_ROS_TYPE_RE = re.compile(r"^ALIYUN::[A-Z0-9]+::[A-Za-z0-9]+$")
_ROS_OTHER_TYPE_RE = re.compile(
    r"^(DATASOURCE::[A-Z0-9]+::[A-Za-z0-9]+|Custom::[A-Za-z0-9]+|MODULE::[A-Za-z0-9]+::[A-Za-z0-9:]+)$"
)
_ROS_SERVICES = frozenset(
    """ACK ACTIONTRAIL ADB ALB ALIDNS AMQP APIGATEWAY ARMS BASTIONHOST CAS CDN CEN CLICKHOUSE CLOUDFW CLOUDSSO CMS CONFIG CR CS
    DATAHUB DATAWORKS DBS DCDN DDOSCOO DNS DRDS DTS EAIS ECD ECI ECS EDAS EHPC ELASTICSEARCH EMR ESS FC FC3 FNF GA GDB GPDB
    HBASE HBR
    IMM IOT KAFKA KMS LINDORM MARKETPLACE MNS MONGODB MSE NAS NLB OOS OSS OTS PAI POLARDB POLARDBX PRIVATELINK PVTZ RAM RDS REDIS
    RESOURCEMANAGER ROCKETMQ ROS SAE SAG SCDN SLB SLS SMARTAG TAG TSDB VOD VPC WAF""".split()
)
_ROS_TAGGABLE = frozenset(
    ROS_TYPES - {"ALIYUN::ECS::SecurityGroupIngress", "ALIYUN::VPC::EIPAssociation", "ALIYUN::VPC::SnatEntry", "ALIYUN::REDIS::Whitelist",
                 "ALIYUN::SLB::Listener", "ALIYUN::SLB::BackendServerAttachment", "ALIYUN::ALB::Listener",
                 "ALIYUN::ALB::BackendServerAttachment", "ALIYUN::RDS::Account", "ALIYUN::SLS::Logstore",
                 "ALIYUN::DNS::DomainRecord", "ALIYUN::NAS::MountTarget",
                 "ALIYUN::NLB::Listener", "ALIYUN::NLB::BackendServerAttachment", "ALIYUN::RAM::Role",
                 "ALIYUN::RAM::ManagedPolicy",
                 "ALIYUN::FC::Function", "ALIYUN::FC::Trigger", "ALIYUN::CS::ClusterNodePool",
                 "ALIYUN::ESS::ScalingConfiguration", "ALIYUN::ESS::ScalingGroupEnable"}
)
_ROS_ACCESS_KEY_PROPS = {"accesskeyid", "accesskeysecret", "secretkey", "secretaccesskey"}


def _review_ros(doc: dict[str, Any]) -> list[Finding]:
    """Run every ROS rule over a parsed template."""
    resources = doc.get("Resources") if isinstance(doc.get("Resources"), dict) else {}
    parameters = doc.get("Parameters") if isinstance(doc.get("Parameters"), dict) else {}
    findings = _ros_version(doc)
    findings += _ros_parameters(parameters, doc)
    findings += _ros_references(doc, resources, parameters)
    has_https = any(
        isinstance(r, dict) and r.get("Type") == "ALIYUN::SLB::Listener" and str(_props(r).get("Protocol", "")).lower() == "https"
        for r in resources.values()
    )
    for name, res in resources.items():
        base = f"Resources.{name}"
        if not isinstance(res, dict):
            findings.append(
                _finding("IAC020", base, "The resource is not a mapping with a Type.", "Give the resource a Type and Properties.")
            )
            continue
        findings += _ros_type(base, res.get("Type"))
        findings += _ros_resource(base, res.get("Type"), _props(res), has_https)
    return findings


def _props(resource: dict[str, Any]) -> dict[str, Any]:
    props = resource.get("Properties")
    return props if isinstance(props, dict) else {}


def _ros_version(doc: dict[str, Any]) -> list[Finding]:
    """IAC022: ROS requires ROSTemplateFormatVersion 2015-09-01."""
    version = doc.get("ROSTemplateFormatVersion")
    if version is None:
        msg = "The template has no ROSTemplateFormatVersion."
    elif str(version) != ROS_TEMPLATE_VERSION:
        msg = f"ROSTemplateFormatVersion is '{version}', but ROS only accepts '{ROS_TEMPLATE_VERSION}'."
    else:
        return []
    return [
        _finding(
            "IAC022", "ROSTemplateFormatVersion", msg, f"Add `ROSTemplateFormatVersion: '{ROS_TEMPLATE_VERSION}'` at the top."
        )
    ]


def _ros_parameters(parameters: dict[str, Any], doc: dict[str, Any]) -> list[Finding]:
    """IAC004/IAC005 on secret-looking parameters and IAC018 on parameters nobody references."""
    findings: list[Finding] = []
    used = _ros_used_names({k: v for k, v in doc.items() if k != "Parameters"})
    for name, spec in parameters.items():
        spec = spec if isinstance(spec, dict) else {}
        base = f"Parameters.{name}"
        if _SECRET_NAME.search(str(name)):
            if not _truthy(spec.get("NoEcho")):
                findings.append(
                    _finding(
                        "IAC004",
                        f"{base}.NoEcho",
                        f"Parameter '{name}' looks like a secret but is not NoEcho, so its value is shown in console and API.",
                        "Set `NoEcho: true` on the parameter.",
                    )
                )
            if spec.get("Default") not in (None, ""):
                findings.append(
                    _finding(
                        "IAC005",
                        f"{base}.Default",
                        f"Parameter '{name}' looks like a secret and has a default value stored in the template.",
                        "Remove the Default and pass the value at deploy time (or reference a KMS/OOS secret parameter).",
                    )
                )
        if name not in used:
            findings.append(
                _finding(
                    "IAC018",
                    base,
                    f"Parameter '{name}' is declared but never referenced.",
                    f"Reference it with `Ref: {name}` where it is needed, or delete the parameter.",
                )
            )
    return findings


def _walk(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Yield (location, node) for every node of a nested dict/list structure."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


_SUB_VAR = re.compile(r"\$\{([^!}][^}]*)\}")


def _ros_used_names(tree: Any) -> set[str]:
    """Names referenced via Ref, Fn::GetAtt or ${Name} inside Fn::Sub anywhere in the tree."""
    used: set[str] = set()
    for _, node in _walk(tree, ""):
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("Ref"), str):
            used.add(node["Ref"])
        sub = node.get("Fn::Sub")
        template = sub[0] if isinstance(sub, list) and sub else sub
        if isinstance(template, str):
            used.update(m.split(".", 1)[0].strip() for m in _SUB_VAR.findall(template))
    return used


def _ros_references(doc: dict[str, Any], resources: dict[str, Any], parameters: dict[str, Any]) -> list[Finding]:
    """IAC019: Ref to an unknown parameter/resource, Fn::GetAtt to an unknown resource."""
    findings: list[Finding] = []
    for path, node in _walk({k: v for k, v in doc.items() if k != "Parameters"}, ""):
        if not isinstance(node, dict):
            continue
        ref = node.get("Ref")
        if isinstance(ref, str) and not ref.startswith("ALIYUN::") and ref not in resources and ref not in parameters:
            findings.append(
                _finding(
                    "IAC019",
                    path,
                    f"Ref points to '{ref}', which is neither a parameter nor a resource of this template.",
                    f"Declare '{ref}' under Parameters or Resources, or fix the name in the Ref.",
                )
            )
        target = _getatt_target(node.get("Fn::GetAtt"))
        if target is not None and target not in resources:
            findings.append(
                _finding(
                    "IAC019",
                    path,
                    f"Fn::GetAtt points to resource '{target}', which is not declared in Resources.",
                    f"Declare resource '{target}' or fix the resource name in Fn::GetAtt.",
                )
            )
    return findings


def _getatt_target(value: Any) -> str | None:
    """The resource name of an Fn::GetAtt ([name, attr] or "name.attr"); None when not literal."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str):
        return value.split(".", 1)[0]
    return None


def _ros_type(base: str, rtype: Any) -> list[Finding]:
    """IAC020 for missing/malformed/unknown-service types, IAC021 for well-formed types outside the catalog."""
    if not isinstance(rtype, str) or not rtype:
        return [
            _finding("IAC020", f"{base}.Type", "The resource has no Type.", "Set Type to an ALIYUN::<Service>::<Resource> type.")
        ]
    if _ROS_OTHER_TYPE_RE.match(rtype):
        return []
    if not _ROS_TYPE_RE.match(rtype):
        return [
            _finding(
                "IAC020",
                f"{base}.Type",
                f"Resource type '{rtype}' is not of the form ALIYUN::<SERVICE>::<Resource>.",
                "Fix the type spelling, e.g. ALIYUN::ECS::Instance (two '::' separators, upper-case service).",
            )
        ]
    service = rtype.split("::")[1]
    if service not in _ROS_SERVICES:
        return [
            _finding(
                "IAC020",
                f"{base}.Type",
                f"Resource type '{rtype}' uses the unknown service '{service}'.",
                "Use a service prefix ROS supports (ECS, VPC, SLB, RDS, REDIS, OSS, ...); check the ROS resource type reference.",
            )
        ]
    if rtype not in ROS_TYPES:
        return [
            _finding(
                "IAC021",
                f"{base}.Type",
                f"Resource type '{rtype}' is well-formed but outside the engine's catalog, so its properties are not checked.",
                "Verify the type and its properties against the ROS resource type reference.",
            )
        ]
    return []


def _ros_resource(base: str, rtype: Any, props: dict[str, Any], has_https: bool) -> list[Finding]:
    """Property-level rules for one ROS resource."""
    p = f"{base}.Properties"
    findings = _ros_secrets(p, props)
    if rtype in _ROS_TAGGABLE and not props.get("Tags"):
        findings.append(_missing_tags(f"{p}.Tags", "Tags"))
    if rtype == "ALIYUN::ECS::SecurityGroup":
        for i, rule in enumerate(props.get("SecurityGroupIngress") or []):
            if isinstance(rule, dict):
                findings += _ros_ingress(f"{p}.SecurityGroupIngress[{i}]", rule)
    elif rtype == "ALIYUN::ECS::SecurityGroupIngress":
        findings += _ros_ingress(p, props)
    elif rtype == "ALIYUN::ECS::Instance":
        findings += _ros_instance(p, props)
    elif rtype == "ALIYUN::ECS::Disk" and not _truthy(props.get("Encrypted")):
        findings.append(_unencrypted_disk(f"{p}.Encrypted", "`Encrypted: true`"))
    elif rtype == "ALIYUN::OSS::Bucket":
        findings += _oss(p, props.get("AccessControl"), bool(props.get("ServerSideEncryptionConfiguration")), ros=True)
    elif rtype == "ALIYUN::RDS::DBInstance":
        findings += _rds(p, props.get("DeletionProtection"), props.get("BackupRetentionPeriod"), ros=True)
        if not (props.get("SlaveZoneIds") or props.get("ZoneIdSlave1")):
            findings.append(_single_zone(f"{p}.SlaveZoneIds", "SlaveZoneIds (a second zone's vSwitch and zone)"))
        findings += _open_allowlist(_split_ips(props.get("SecurityIPList")), f"{p}.SecurityIPList", "RDS")
    elif rtype == "ALIYUN::REDIS::Instance" and props.get("Password") in (None, ""):
        findings.append(_redis_no_password(f"{p}.Password", "Password (a Ref to a NoEcho parameter)"))
    elif rtype == "ALIYUN::REDIS::Whitelist":
        findings += _open_allowlist(_split_ips(props.get("SecurityIps")), f"{p}.SecurityIps", "Redis")
    elif rtype == "ALIYUN::SLB::Listener":
        findings += _slb_http(f"{p}.Protocol", props.get("Protocol"), props.get("ListenerPort"), has_https)
    elif rtype == "ALIYUN::MONGODB::Instance":
        findings += _open_allowlist(_split_ips(props.get("SecurityIPArray")), f"{p}.SecurityIPArray", "MongoDB")
    elif rtype == "ALIYUN::POLARDB::DBCluster":
        findings += _open_allowlist(_split_ips(props.get("SecurityIPList")), f"{p}.SecurityIPList", "PolarDB")
    elif rtype == "ALIYUN::NAS::FileSystem" and _as_int(props.get("EncryptType", 0)) == 0:
        findings.append(_nas_unencrypted(f"{p}.EncryptType", "EncryptType: 1 (or 2 with a KmsKeyId)"))
    elif rtype == "ALIYUN::ESS::ScalingConfiguration" and (_as_int(props.get("InternetMaxBandwidthOut")) or 0) > 0:
        findings.append(_public_bandwidth(f"{p}.InternetMaxBandwidthOut", "InternetMaxBandwidthOut: 0"))
    elif rtype == "ALIYUN::CS::ManagedKubernetesCluster" and _truthy(props.get("EndpointPublicAccess")):
        findings.append(_ack_public(f"{p}.EndpointPublicAccess", "EndpointPublicAccess: false"))
    elif rtype == "ALIYUN::FC::Trigger":
        findings += _fc_anonymous(f"{p}.TriggerConfig.AuthType", props.get("TriggerConfig"))
    elif rtype == "ALIYUN::RAM::ManagedPolicy":
        findings += _ram_wide(f"{p}.PolicyDocument", props.get("PolicyDocument"))
    elif rtype == "ALIYUN::KMS::Key" and not _truthy(props.get("EnableAutomaticRotation")):
        findings.append(_kms_no_rotation(f"{p}.EnableAutomaticRotation", "EnableAutomaticRotation: true"))
    elif rtype == "ALIYUN::SLS::Logstore":
        findings += _log_retention(f"{p}.TTL", props.get("TTL", 30))
    return findings


def _ros_secrets(p: str, props: dict[str, Any]) -> list[Finding]:
    """IAC003/IAC006: literal passwords and AccessKeys anywhere in a resource's properties."""
    findings: list[Finding] = []
    for path, node in _walk(props, ""):
        key = path.rsplit(".", 1)[-1].lower()
        literal = isinstance(node, str | int) and not isinstance(node, bool) and str(node) != ""
        if not literal or "[" in key:
            continue
        if key.endswith("password"):
            findings.append(
                _finding(
                    "IAC003",
                    f"{p}.{path}",
                    f"Property '{path}' is set to a literal password stored in the template.",
                    "Declare a parameter with `NoEcho: true` and no Default, and set the property to `Ref: <thatParameter>`.",
                )
            )
        elif key in _ROS_ACCESS_KEY_PROPS:
            findings.append(_literal_access_key(f"{p}.{path}", path))
    return findings


def _ros_ingress(location: str, rule: dict[str, Any]) -> list[Finding]:
    cidrs = [rule.get("SourceCidrIp"), rule.get("Ipv6SourceCidrIp")]
    return _ingress_findings(location, rule.get("IpProtocol"), rule.get("PortRange"), cidrs, rule.get("Policy"))


def _ros_instance(p: str, props: dict[str, Any]) -> list[Finding]:
    """IAC013 on unencrypted DiskMappings entries and IAC014 on public bandwidth."""
    findings: list[Finding] = []
    for i, disk in enumerate(props.get("DiskMappings") or []):
        if isinstance(disk, dict) and not _truthy(disk.get("Encrypted")):
            findings.append(_unencrypted_disk(f"{p}.DiskMappings[{i}]", "`Encrypted: 'true'` on the disk mapping"))
    bandwidth = _as_int(props.get("InternetMaxBandwidthOut"))
    if bandwidth is not None and bandwidth > 0:
        findings.append(_public_bandwidth(f"{p}.InternetMaxBandwidthOut", "InternetMaxBandwidthOut: 0"))
    return findings


# --------------------------------------------------------------------------- messages shared by ROS and Terraform


def _missing_tags(location: str, prop: str) -> Finding:
    return _finding(
        "IAC015",
        location,
        "The resource has no tags, which makes cost allocation and ownership tracking harder.",
        f"Add {prop} with at least an owner/project/environment tag.",
    )


def _literal_access_key(location: str, what: str) -> Finding:
    return _finding(
        "IAC006",
        location,
        f"'{what}' is a literal AccessKey credential stored in the template.",
        "Remove the credential; use a RAM role, environment variables (ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY) or a profile.",
    )


def _unencrypted_disk(location: str, setting: str) -> Finding:
    return _finding(
        "IAC013",
        location,
        "The data disk is not encrypted at rest.",
        f"Set {setting} (optionally with a KMS key id).",
    )


def _public_bandwidth(location: str, setting: str) -> Finding:
    return _finding(
        "IAC014",
        location,
        "The ECS instance gets a public IP because its outbound internet bandwidth is above 0.",
        f"If the instance need not be reachable from the internet, set {setting} and use a NAT gateway/SLB instead.",
    )


def _redis_no_password(location: str, setting: str) -> Finding:
    return _finding(
        "IAC012",
        location,
        "The Redis instance has no password, so any client inside its allow-list can connect without authentication.",
        f"Set {setting}.",
    )


def _oss(p: str, acl: Any, encrypted: bool, *, ros: bool) -> list[Finding]:
    """IAC007 (public ACL) and IAC008 (no server-side encryption) for an OSS bucket."""
    findings: list[Finding] = []
    acl_key, sse = ("AccessControl", "ServerSideEncryptionConfiguration") if ros else ("acl", "server_side_encryption_rule")
    if isinstance(acl, str) and acl.lower() in {"public-read", "public-read-write"}:
        findings.append(
            _finding(
                "IAC007",
                f"{p}.{acl_key}",
                f"The bucket ACL is {acl.lower()}, so anyone on the internet can access its objects.",
                f"Set {acl_key} to private and share objects with signed URLs or a CDN origin instead.",
            )
        )
    if not encrypted:
        example = "with SSEAlgorithm: AES256 or KMS" if ros else 'block with sse_algorithm = "AES256" or "KMS"'
        findings.append(_finding("IAC008", f"{p}.{sse}", "The bucket has no server-side encryption.", f"Add {sse} {example}."))
    return findings


def _rds(p: str, deletion_protection: Any, retention: Any, *, ros: bool) -> list[Finding]:
    """IAC009 (no deletion protection) and IAC010 (explicit retention below 7 days) for RDS."""
    findings: list[Finding] = []
    key = "DeletionProtection" if ros else "deletion_protection"
    if not _truthy(deletion_protection):
        findings.append(
            _finding(
                "IAC009",
                f"{p}.{key}",
                "The RDS instance has no deletion protection, so a stack delete or mistake can destroy it.",
                f"Set {key} to true.",
            )
        )
    if ros:
        findings += _short_retention(f"{p}.BackupRetentionPeriod", retention, "BackupRetentionPeriod")
    return findings


def _short_retention(location: str, retention: Any, key: str) -> list[Finding]:
    days = _as_int(retention)
    if days is None or days >= 7:
        return []
    return [
        _finding(
            "IAC010",
            location,
            f"Backups are kept for only {days} day(s); point-in-time recovery needs a longer window.",
            f"Set {key} to at least 7 days.",
        )
    ]


def _slb_http(location: str, protocol: Any, port: Any, has_https: bool) -> list[Finding]:
    if has_https or not (isinstance(protocol, str) and protocol.lower() == "http" and _as_int(port) == 80):
        return []
    return [
        _finding(
            "IAC023",
            location,
            "The load balancer serves plain HTTP on port 80 and has no HTTPS listener.",
            "Add an HTTPS listener on 443 with a certificate and redirect HTTP to HTTPS.",
        )
    ]


def _kms_no_rotation(location: str, setting: str) -> Finding:
    return _finding("IAC024", location, "The KMS key is never rotated automatically.",
                    f"Set {setting} (and a RotationInterval such as 365d) so a leaked key version has a bounded life.")


def _json_document(value: Any) -> Any:
    """A policy document written as a JSON string (or already a mapping); None when it cannot be read."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        for text in (value, f'"{value}"'):  # as written, or with the HCL string's escapes (\") still in it
            try:
                document = json.loads(text)
            except ValueError:
                continue
            document = json.loads(document) if isinstance(document, str) else document
            return document if isinstance(document, dict) else None
    return None


def _single_zone(location: str, setting: str) -> Finding:
    return _finding("IAC030", location, "The database runs in one zone: a zone outage takes it down.",
                    f"Set {setting} so a standby runs in another zone.")


def _ack_public(location: str, setting: str) -> Finding:
    return _finding("IAC029", location, "The cluster's API server has a public endpoint.",
                    f"Set {setting} and reach the API server from the VPC (or a bastion); open it only to known CIDRs.")


def _fc_anonymous(location: str, config: Any) -> list[Finding]:
    if not isinstance(config, dict):
        return []
    auth = config.get("AuthType", config.get("authType"))
    if str(auth).lower() != "anonymous":
        return []
    return [_finding("IAC028", location, "Anyone on the internet can call this function's HTTP trigger.",
                     "Use AuthType function (signed requests) unless the endpoint is meant to be public.")]


def _ram_wide(location: str, document: Any) -> list[Finding]:
    """IAC027: an Allow statement whose actions include "*" or "<service>:*" on every resource."""
    if not isinstance(document, dict):
        return []
    statements = document.get("Statement")
    for statement in statements if isinstance(statements, list) else []:
        if not isinstance(statement, dict) or str(statement.get("Effect", "")).lower() != "allow":
            continue
        actions = statement.get("Action")
        actions = [actions] if isinstance(actions, str) else actions if isinstance(actions, list) else []
        resources = statement.get("Resource")
        resources = [resources] if isinstance(resources, str) else resources if isinstance(resources, list) else []
        if any(a == "*" or (isinstance(a, str) and a.endswith(":*")) for a in actions) and "*" in resources:
            return [_finding("IAC027", location, "The policy allows every action of a service (or of all services) "
                             "on every resource.", "Grant the specific actions the workload needs, on its own resources.")]
    return []


def _nas_unencrypted(location: str, setting: str) -> Finding:
    return _finding("IAC026", location, "The NAS file system stores data unencrypted.",
                    f"Set {setting}: encryption at rest cannot be turned on after the file system exists.")


def _log_retention(location: str, days: Any) -> list[Finding]:
    value = _as_int(days)
    if value is None or value >= 30:
        return []
    return [_finding("IAC025", location, f"The logstore keeps logs for only {value} days.",
                     "Keep logs for at least 30 days (audit and incident investigation usually need 90 or more).")]


# --------------------------------------------------------------------------- Terraform


@dataclass(frozen=True)
class _Expr:
    """A Terraform expression (reference, function call, interpolated string): not a literal."""

    text: str


def _tf_norm(value: Any) -> Any:
    """Turn python-hcl2 (v8) output into plain values: quoted strings → str, expressions → _Expr."""
    if isinstance(value, dict):
        return {_unquote(k): _tf_norm(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [_tf_norm(v) for v in value]
    if isinstance(value, str):
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            inner = value[1:-1]
            return _Expr(inner) if "${" in inner else inner
        if value.startswith("${") and value.endswith("}"):
            return _Expr(value[2:-1])
        return _Expr(value)
    return value


def _unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == '"' and key[-1] == '"' else key


def _labelled(blocks: Any, depth: int) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Flatten hcl2's [{label: {label: body}}] lists into (labels, body) pairs."""
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def visit(node: Any, labels: tuple[str, ...]) -> None:
        if len(labels) == depth:
            if isinstance(node, dict):
                out.append((labels, node))
            return
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, (*labels, key))
        elif isinstance(node, list):
            for item in node:
                visit(item, labels)

    for block in blocks if isinstance(blocks, list) else []:
        visit(block, ())
    return out


@dataclass
class _TfDoc:
    """The blocks of a Terraform configuration, normalised."""

    resources: list[tuple[str, str, dict[str, Any]]]
    data: list[tuple[str, str, dict[str, Any]]]
    providers: list[tuple[str, dict[str, Any]]]
    variables: dict[str, dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    locals: dict[str, Any]
    modules: dict[str, dict[str, Any]]
    terraform: list[dict[str, Any]]

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> _TfDoc:
        doc = _tf_norm(raw)
        local_values: dict[str, Any] = {}
        for block in doc.get("locals") or []:
            if isinstance(block, dict):
                local_values.update(block)
        return cls(
            resources=[(t, n, body) for (t, n), body in _labelled(doc.get("resource"), 2)],
            data=[(t, n, body) for (t, n), body in _labelled(doc.get("data"), 2)],
            providers=[(n, body) for (n,), body in _labelled(doc.get("provider"), 1)],
            variables={n: body for (n,), body in _labelled(doc.get("variable"), 1)},
            outputs={n: body for (n,), body in _labelled(doc.get("output"), 1)},
            locals=local_values,
            modules={n: body for (n,), body in _labelled(doc.get("module"), 1)},
            terraform=[b for b in doc.get("terraform") or [] if isinstance(b, dict)],
        )


_TF_TAGGABLE = frozenset(
    {
        "alicloud_vpc",
        "alicloud_vswitch",
        "alicloud_security_group",
        "alicloud_instance",
        "alicloud_slb_load_balancer",
        "alicloud_alb_load_balancer",
        "alicloud_nat_gateway",
        "alicloud_eip_address",
        "alicloud_db_instance",
        "alicloud_kvstore_instance",
        "alicloud_oss_bucket",
        "alicloud_ecs_disk",
    }
)


def _review_terraform(doc: _TfDoc) -> list[Finding]:
    """Run every Terraform rule over a normalised configuration."""
    findings = _tf_provider(doc) + _tf_variables(doc) + _tf_references(doc)
    sse_targets = {
        body["bucket"].text.split(".")[1]
        for t, _, body in doc.resources
        if t == "alicloud_oss_bucket_server_side_encryption"
        and isinstance(body.get("bucket"), _Expr)
        and body["bucket"].text.count(".") >= 2
    }
    has_https = any(t == "alicloud_slb_listener" and str(b.get("protocol", "")).lower() == "https" for t, _, b in doc.resources)
    for rtype, name, body in doc.resources:
        base = f"{rtype}.{name}"
        findings += _tf_secrets(base, body)
        if rtype in _TF_TAGGABLE and not body.get("tags"):
            findings.append(_missing_tags(f"{base}.tags", "a tags map"))
        findings += _tf_resource(base, rtype, name, body, sse_targets, has_https)
    return findings


def _tf_resource(base: str, rtype: str, name: str, body: dict[str, Any], sse_targets: set[str], has_https: bool) -> list[Finding]:
    """Attribute-level rules for one Terraform resource."""
    if rtype == "alicloud_security_group_rule":
        if str(body.get("type", "")).lower() != "ingress":
            return []
        cidrs = [body.get("cidr_ip"), body.get("ipv6_cidr_ip")]
        return _ingress_findings(base, body.get("ip_protocol"), body.get("port_range"), cidrs, body.get("policy"))
    if rtype == "alicloud_instance":
        return _tf_instance(base, body)
    if rtype in {"alicloud_ecs_disk", "alicloud_disk"} and not _truthy(body.get("encrypted")):
        return [_unencrypted_disk(f"{base}.encrypted", "encrypted = true")]
    if rtype == "alicloud_oss_bucket":
        encrypted = bool(body.get("server_side_encryption_rule")) or name in sse_targets
        return _oss(base, body.get("acl"), encrypted, ros=False)
    if rtype == "alicloud_oss_bucket_acl":
        return _oss(base, body.get("acl"), True, ros=False)
    if rtype == "alicloud_db_instance":
        findings = _rds(base, body.get("deletion_protection"), None, ros=False)
        if not body.get("zone_id_slave_a"):
            findings.append(_single_zone(f"{base}.zone_id_slave_a", "zone_id_slave_a (and a vswitch_id per zone)"))
        return findings + _open_allowlist(_split_ips(body.get("security_ips")), f"{base}.security_ips", "RDS")
    if rtype == "alicloud_db_backup_policy":
        key = "backup_retention_period" if "backup_retention_period" in body else "retention_period"
        return _short_retention(f"{base}.{key}", body.get(key), key)
    if rtype == "alicloud_kvstore_instance":
        findings = _open_allowlist(_split_ips(body.get("security_ips")), f"{base}.security_ips", "Redis")
        if body.get("password") in (None, "") and not body.get("kms_encrypted_password"):
            findings.append(
                _redis_no_password(f"{base}.password", "password = var.<sensitive variable> (or kms_encrypted_password)")
            )
        return findings
    if rtype == "alicloud_slb_listener":
        return _slb_http(f"{base}.protocol", body.get("protocol"), body.get("frontend_port"), has_https)
    if rtype == "alicloud_mongodb_instance":
        return _open_allowlist(_split_ips(body.get("security_ip_list")), f"{base}.security_ip_list", "MongoDB")
    if rtype == "alicloud_polardb_cluster":
        return _open_allowlist(_split_ips(body.get("security_ips")), f"{base}.security_ips", "PolarDB")
    if rtype == "alicloud_nas_file_system" and _as_int(body.get("encrypt_type", 0)) == 0:
        return [_nas_unencrypted(f"{base}.encrypt_type", "encrypt_type = 1 (or 2 with a kms_key_id)")]
    if rtype == "alicloud_ess_scaling_configuration" and (_as_int(body.get("internet_max_bandwidth_out")) or 0) > 0:
        return [_public_bandwidth(f"{base}.internet_max_bandwidth_out", "internet_max_bandwidth_out = 0")]
    if rtype in {"alicloud_cs_managed_kubernetes", "alicloud_cs_kubernetes"} and _truthy(body.get("slb_internet_enabled")):
        return [_ack_public(f"{base}.slb_internet_enabled", "slb_internet_enabled = false")]
    if rtype == "alicloud_fc_trigger":
        return _fc_anonymous(f"{base}.config", _json_document(body.get("config")))
    if rtype == "alicloud_ram_policy":
        return _ram_wide(f"{base}.policy_document", _json_document(body.get("policy_document")))
    if rtype == "alicloud_kms_key" and str(body.get("automatic_rotation", "Disabled")) != "Enabled":
        return [_kms_no_rotation(f"{base}.automatic_rotation", 'automatic_rotation = "Enabled"')]
    if rtype == "alicloud_log_store":
        return _log_retention(f"{base}.retention_period", body.get("retention_period", 30))
    return []


def _tf_instance(base: str, body: dict[str, Any]) -> list[Finding]:
    """IAC013 on unencrypted data_disks blocks and IAC014 on public bandwidth."""
    findings: list[Finding] = []
    disks = body.get("data_disks") or []
    for i, disk in enumerate(disks if isinstance(disks, list) else [disks]):
        if isinstance(disk, dict) and not _truthy(disk.get("encrypted")):
            findings.append(_unencrypted_disk(f"{base}.data_disks[{i}]", "encrypted = true in the data_disks block"))
    bandwidth = _as_int(body.get("internet_max_bandwidth_out"))
    if bandwidth is not None and bandwidth > 0:
        findings.append(_public_bandwidth(f"{base}.internet_max_bandwidth_out", "internet_max_bandwidth_out = 0"))
    return findings


def _tf_secrets(base: str, body: dict[str, Any]) -> list[Finding]:
    """IAC003: literal values of *password arguments (kms_encrypted_password holds ciphertext, so it is fine)."""
    findings: list[Finding] = []
    for key, value in body.items():
        lowered = key.lower()
        if lowered.endswith("password") and not lowered.startswith("kms_encrypted") and isinstance(value, str) and value:
            findings.append(
                _finding(
                    "IAC003",
                    f"{base}.{key}",
                    f"Argument '{key}' is set to a literal password stored in the configuration and state.",
                    f"Use a `sensitive = true` variable without a default (e.g. {key} = var.{key}) or kms_encrypted_password.",
                )
            )
    return findings


def _tf_provider(doc: _TfDoc) -> list[Finding]:
    """IAC006 (literal keys), IAC017 (no region), IAC016 (unpinned version) for the alicloud provider."""
    uses_alicloud = any(t.startswith("alicloud_") for t, _, _ in doc.resources + doc.data)
    providers = [(n, b) for n, b in doc.providers if n == "alicloud"]
    if not uses_alicloud and not providers:
        return []
    findings: list[Finding] = []
    for index, (_, body) in enumerate(providers):
        where = "provider.alicloud" if len(providers) == 1 else f"provider.alicloud[{index}]"
        for key in ("access_key", "secret_key", "security_token"):
            if isinstance(body.get(key), str) and body[key]:
                findings.append(_literal_access_key(f"{where}.{key}", key))
        if body.get("region") in (None, ""):
            findings.append(_no_region(f"{where}.region"))
    if not providers:
        findings.append(_no_region("provider.alicloud"))
    findings += _tf_pinning(doc)
    return findings


def _no_region(location: str) -> Finding:
    return _finding(
        "IAC017",
        location,
        "The alicloud provider has no explicit region, so the region depends on the environment (ALICLOUD_REGION).",
        'Set region = "cn-hangzhou" (or a region variable) in the provider "alicloud" block.',
    )


def _tf_pinning(doc: _TfDoc) -> list[Finding]:
    """IAC016: require required_providers.alicloud.version with an upper bound (~>, =, <= or <)."""
    constraint: Any = None
    for block in doc.terraform:
        for required in block.get("required_providers") or []:
            if isinstance(required, dict) and "alicloud" in required:
                entry = required["alicloud"]
                constraint = entry.get("version") if isinstance(entry, dict) else entry
    location = "terraform.required_providers.alicloud"
    fix = 'Pin the provider: required_providers { alicloud = { source = "aliyun/alicloud", version = "~> 1.230" } }.'
    if not isinstance(constraint, str) or not constraint.strip():
        return [_finding("IAC016", location, "The alicloud provider version is not constrained.", fix)]
    parts = [p.strip().replace(" ", "") for p in constraint.split(",") if p.strip()]
    if all(p.startswith((">", "!=")) for p in parts):
        return [_finding("IAC016", location, f"The alicloud provider constraint '{constraint}' has no upper bound.", fix)]
    return []


def _tf_variables(doc: _TfDoc) -> list[Finding]:
    """IAC004/IAC005 for secret-looking variables."""
    findings: list[Finding] = []
    for name, body in doc.variables.items():
        if not _SECRET_NAME.search(name):
            continue
        if not _truthy(body.get("sensitive")):
            findings.append(
                _finding(
                    "IAC004",
                    f"variable.{name}.sensitive",
                    f"Variable '{name}' looks like a secret but is not marked sensitive, so plans and logs may show it.",
                    "Add `sensitive = true` to the variable.",
                )
            )
        default = body.get("default")
        if default is not None and default != "" and default != _Expr("null"):
            findings.append(
                _finding(
                    "IAC005",
                    f"variable.{name}.default",
                    f"Variable '{name}' looks like a secret and has a default value stored in the configuration.",
                    "Remove the default and supply the value via TF_VAR_<name>, a tfvars file kept out of VCS, or KMS.",
                )
            )
    return findings


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_TF_REF_PATTERNS = (
    ("variable", re.compile(r"(?<![\w.])var\.([A-Za-z_][\w-]*)")),
    ("local value", re.compile(r"(?<![\w.])local\.([A-Za-z_][\w-]*)")),
    ("module", re.compile(r"(?<![\w.])module\.([A-Za-z_][\w-]*)")),
    ("data source", re.compile(r"(?<![\w.])data\.([a-z][a-z0-9]*_\w*)\.([A-Za-z_][\w-]*)")),
    ("resource", re.compile(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]*)\.([A-Za-z_][\w-]*)")),
)


def _tf_references(doc: _TfDoc) -> list[Finding]:
    """IAC019: expressions that reference undeclared variables, locals, modules, data sources or resources."""
    declared = {
        "variable": set(doc.variables),
        "local value": set(doc.locals),
        "module": set(doc.modules),
        "data source": {f"{t}.{n}" for t, n, _ in doc.data},
        "resource": {f"{t}.{n}" for t, n, _ in doc.resources},
    }
    roots: list[tuple[str, Any]] = [(f"{t}.{n}", b) for t, n, b in doc.resources]
    roots += [(f"data.{t}.{n}", b) for t, n, b in doc.data]
    roots += [(f"output.{n}", b) for n, b in doc.outputs.items()]
    roots += [(f"module.{n}", b) for n, b in doc.modules.items()]
    roots += [(f"provider.{n}", b) for n, b in doc.providers]
    roots += [("locals", doc.locals)]
    findings: list[Finding] = []
    for root, body in roots:
        for path, node in _walk(body, root):
            if isinstance(node, _Expr):
                findings += _dangling_in(path, node.text, declared)
    return findings


def _dangling_in(path: str, text: str, declared: dict[str, set[str]]) -> list[Finding]:
    """Find references in one expression text that name nothing declared."""
    code = _QUOTED.sub('""', text)
    findings: list[Finding] = []
    seen: set[str] = set()
    for kind, pattern in _TF_REF_PATTERNS:
        for match in pattern.finditer(code):
            name = ".".join(match.groups())
            if kind == "resource" and match.group(1) in {"data"}:
                continue
            if name in declared[kind] or name in seen:
                continue
            seen.add(name)
            findings.append(
                _finding(
                    "IAC019",
                    path,
                    f"The expression references {kind} '{name}', which is not declared in this configuration.",
                    f"Declare the {kind} '{name}' or fix the reference.",
                )
            )
    return findings
