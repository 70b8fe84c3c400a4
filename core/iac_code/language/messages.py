"""Every user-visible text the server produces, as message-catalog ids.

Strings here are English source texts (gettext msgids) with ``{name}``
placeholders; :func:`iac_code.language.i18n.translator` renders them in a turn's
language. Protocol field names, enum values, ids and command shapes are never
in here and never translated. Keep this module the single source of catalog
entries: the catalog test checks every id against every language.
"""

from __future__ import annotations


def N_(message: str) -> str:
    """Mark a catalog id (gettext convention); returns it unchanged."""
    return message


# ---------------------------------------------------------------- turn outcomes
EMPTY_INPUT = N_("A2A server currently accepts text input only.")
INVALID_WORKSPACE = N_("Invalid A2A workspace metadata.")
# Why the workspace was refused (a second text part beside INVALID_WORKSPACE; never a path).
WORKSPACE_NOT_ABSOLUTE = N_("The workspace (metadata.iac_code.cwd) must be an absolute path.")
WORKSPACE_OUTSIDE_ROOTS = N_(
    "The workspace is outside the directories this server accepts as workspaces. "
    "Send a directory inside them, or no cwd to work in the server's own directory.")
WORKSPACE_MISSING = N_("The workspace directory does not exist on the server.")
WORKSPACE_NOT_DIRECTORY = N_("The workspace is not a directory on the server.")
WORKSPACE_SERVER_STATE = N_("The workspace is inside the server's own state or configuration directories.")
TASK_CANCELED = N_("Task canceled.")
INTERNAL_FAILURE = N_("The agent runtime failed unexpectedly. The error was logged on the server.")
AUTH_REQUIRED = N_("Authentication required. Configure credentials and retry.")
TEMPORARY_ERROR = N_("A temporary error occurred. Please retry.")
PROVIDER_ERROR = N_("The model provider could not answer this request (HTTP {status}).")
PROVIDER_BAD_STREAM = N_("The model provider sent an answer that could not be read. Please retry.")
TOOL_ROUNDS_EXCEEDED = N_("Stopped after {rounds} rounds of tool calls without a final answer.")

# ---------------------------------------------------------------- -32602 request errors (since-0.13.md: sentence-style
# messages are localised by ``preferredLanguage``; English is the protocol's exact text)
UNSUPPORTED_RUN_MODE = N_("Unsupported run mode.")
UNSUPPORTED_PIPELINE = N_("Unsupported pipeline name.")
UNSUPPORTED_REGION = N_("Unsupported Alibaba Cloud region ID.")
SWITCHED_PIPELINE = N_("This session already runs pipeline {durable}; it cannot switch to {requested}.")
CLEANUP_WITHOUT_HANDOFF = N_("Cleanup-only continuation requires a completed Pipeline handoff.")
ANSWER_ONE_TRANSPORT = N_("Permission responses must use exactly one supported JSON transport.")
ANSWER_ONE_TEXT_PART = N_("Permission responses must contain exactly one JSON TextPart.")
ANSWER_CONTEXT_MISMATCH = N_("Permission response contextId does not match message contextId.")

# ---------------------------------------------------------------- permission prompt
PERMISSION_PROMPT = N_("{title} ({target})?")
PROMPT_WRITE_FILE = N_("Write {file} in the workspace?")
PROMPT_WRITE_ANY_FILE = N_("Write a file in the workspace?")
ANSWER_HINT = N_("Reply `allow` to allow this once, or `deny`.")
ANSWER_HINT_WRITE_FILE = N_("Reply `allow` to write {file} once, or `deny`.")
PERMISSION_PENDING = N_(
    "Task {task} is waiting for a permission answer. Answer it with a message whose taskId is {task}: "
    "either the text `allow` or `deny`, or the structured answer (one application/json data part with "
    "\"kind\": \"permission\", as described in the task's metadata.iac_code.input)."
)
OPTION_ALLOW_ONCE = N_("Allow once")
OPTION_DENY = N_("Deny")

TITLE_CREATE_STACK = N_("Create {product} stack")
TITLE_CONTINUE_CREATE_STACK = N_("Continue creating {product} stack")
TITLE_UPDATE_STACK = N_("Update {product} stack")
TITLE_DELETE_STACK = N_("Delete {product} stack")
TITLE_CLOUD_READ = N_("Read Alibaba Cloud data with {operation}")
TITLE_CLOUD_RUN = N_("Run {operation}")
TITLE_SHELL_READ = N_("Read local workspace data")
TITLE_SHELL_RUN = N_("Run a local shell command")
TITLE_FILE_CHANGE = N_("Change a workspace file")
TITLE_READ_TOOL = N_("Read workspace data with {tool}")
TITLE_RUN_TOOL = N_("Run {tool}")
TITLE_FALLBACK = N_("Permission required")

PURPOSE_CLOUD = N_("Call {operation} for the requested Alibaba Cloud infrastructure task.")
PURPOSE_READ = N_("Read local data needed for the requested infrastructure task.")
PURPOSE_SHELL = N_("Execute a local command needed for the requested infrastructure task.")
PURPOSE_FILE = N_("Write a file needed for the requested infrastructure task.")
PURPOSE_OTHER = N_("Run this operation for the requested infrastructure task.")

TARGET_WORKSPACE = N_("the current local workspace")
TARGET_WORKSPACE_FILE = N_("a file in the current workspace")
TARGET_WORKSPACE_OR_ACCOUNT = N_("the current task workspace or cloud account")
TARGET_IN_REGION = N_("{operation} in {region}")
TARGET_STACK = N_("{target}; stack {stack}")
TARGET_COMMAND = N_("{target}; command: {command}")

DEPLOY_SUMMARY = N_("Deploy a ROS stack")
DEPLOY_PLAN = N_("plan: {value}")
DEPLOY_REGION = N_("region: {value}")
DEPLOY_STACK = N_("stack: {value}")
DEPLOY_TEMPLATE = N_("template: {value}")
DEPLOY_COST = N_("estimated monthly cost: {value}")
DEPLOY_RESOURCES = N_("resource costs: {value}")

# ---------------------------------------------------------------- offline runtime
OFFLINE_HELP = N_(
    "I am iac-code's offline engine for Alibaba Cloud Infrastructure as Code. "
    "I can generate ROS templates (for example: \"Create a VPC with two vSwitches in cn-hangzhou.\"), "
    "review templates and convert Terraform to ROS. Tell me what you want to build."
)

TEMPLATE_READY = N_("Here is the template ({file}).")
TEMPLATE_SAVED = N_("Saved {file} in the workspace.")
TEMPLATE_NOT_SAVED = N_("{file} was not written to the workspace.")
NOT_MAPPED = N_("Not included, because I cannot map it yet: {items}.")
REVIEW_NOTHING = N_("There is no template to review: paste one, attach it, or name a file in the workspace.")
CONVERT_NOTHING = N_("There is no Terraform to convert: paste it, attach it, or name a .tf file in the workspace.")
CONVERTED = N_("Converted Terraform resources to ROS: {count}.")
NOT_CONVERTED = N_("Not converted: {items}.")
ROS_NO_TEMPLATE = N_("Generate or convert a template first, then ask me to validate, preview or deploy it.")
ROS_CALL_DONE = N_("ROS {action} succeeded.")
ROS_CALL_FAILED = N_("ROS {action} failed: {error}")

REVIEW_SUBJECT_ROS = N_("the ROS template")
REVIEW_SUBJECT_TERRAFORM = N_("the Terraform configuration")
REVIEW_SUBJECT_UNKNOWN = N_("the input (format not recognised)")
REVIEW_CLEAN = N_("Review of {subject}: no findings.")
REVIEW_HEADLINE = N_("Review of {subject}: errors {errors}, warnings {warnings}, notes {infos}.")
REVIEW_FINDING = N_("[{severity}] {rule} at {location}")
REVIEW_PROBLEM = N_("Problem: {message}")
REVIEW_FIX = N_("Fix: {fix}")
SEVERITY_ERROR = N_("error")
SEVERITY_WARNING = N_("warning")
SEVERITY_INFO = N_("note")

ALL_MESSAGES: tuple[str, ...] = tuple(
    value for name, value in sorted(globals().items()) if name.isupper() and isinstance(value, str)
)
