"""The pipeline's user-facing sentences, in English and Chinese (other languages read the English)."""

from __future__ import annotations

from typing import Any

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "select_prompt": "Choose one of the candidate architectures to deploy.",
        "select_howto": "Answer with the number (for example `candidate 2`) or the name of a candidate.",
        "option_line": "{index}. {name}: {summary} Estimated cost: {cost}.",
        "unknown_index": "There is no candidate {answer}; choose one of {indices}.",
        "unknown_name": "No candidate is called “{answer}”; choose one of {indices}.",
        "unreadable": "That answer does not choose a candidate; choose one of {indices}.",
        "selected": "Selected: {name}.",
        "no_deployer": ("No deployer is configured, so nothing was deployed. The template of “{name}” is stored as the "
                        "task artifact {artifact} (task {task}); deploy it with ROS, or keep editing it here."),
        "handoff": "The pipeline is finished; this conversation continues as normal chat.",
        "early_exit": "This is not an infrastructure request, so no pipeline runs; this conversation continues as normal chat.",
        "canceled": "The pipeline was canceled; this conversation continues as normal chat.",
        "all_failed": "No candidate architecture could be evaluated; this conversation continues as normal chat.",
        "vague_question": "What should I deploy on Alibaba Cloud? Pick the closest workload or describe it.",
        "vague_free": "Describe the application and what it needs (servers, database, traffic).",
        "cloud_question": "This request names {cloud}. This assistant deploys to Alibaba Cloud: build the equivalent there?",
        "cloud_free": "Or describe what you need on Alibaba Cloud.",
        "answer_howto": "Answer with a number, an option, or your own words.",
        "opt_web": "A web application with a database",
        "opt_web_desc": "ECS servers and an RDS MySQL database",
        "opt_api": "An HTTP API",
        "opt_api_desc": "A service answering HTTP requests",
        "opt_static": "A static website",
        "opt_static_desc": "Files served from OSS",
        "opt_alibaba": "Yes, the Alibaba Cloud equivalent",
        "opt_cancel": "No, cancel",
        "cost_note": "Costs: {disclaimer}",
    },
    "zh": {
        "select_prompt": "请选择一个候选架构进行部署。",
        "select_howto": "回复方案编号（例如“方案 2”）或方案名称。",
        "option_line": "{index}. {name}：{summary} 预估费用：{cost}。",
        "unknown_index": "没有方案 {answer}；请在 {indices} 中选择。",
        "unknown_name": "没有名为“{answer}”的方案；请在 {indices} 中选择。",
        "unreadable": "这个回答没有选择方案；请在 {indices} 中选择。",
        "selected": "已选择：{name}。",
        "no_deployer": ("未配置部署器，因此没有部署任何资源。“{name}”的模板已保存为任务产物 {artifact}（任务 {task}）；"
                        "可以用 ROS 部署，或在这里继续修改。"),
        "handoff": "流水线已结束；此会话继续以普通对话进行。",
        "early_exit": "这不是基础设施需求，因此不运行流水线；此会话继续以普通对话进行。",
        "canceled": "流水线已取消；此会话继续以普通对话进行。",
        "all_failed": "没有候选架构评估成功；此会话继续以普通对话进行。",
        "vague_question": "要在阿里云上部署什么？请选择最接近的负载类型或直接描述。",
        "vague_free": "请描述应用及其需求（服务器、数据库、访问量）。",
        "cloud_question": "该需求提到了 {cloud}。本助手部署到阿里云：是否在阿里云上构建对应方案？",
        "cloud_free": "或者描述你在阿里云上的需求。",
        "answer_howto": "回复编号、选项或直接输入文字。",
        "opt_web": "带数据库的 Web 应用",
        "opt_web_desc": "ECS 服务器和 RDS MySQL 数据库",
        "opt_api": "HTTP API 服务",
        "opt_api_desc": "响应 HTTP 请求的服务",
        "opt_static": "静态网站",
        "opt_static_desc": "由 OSS 提供文件",
        "opt_alibaba": "是，使用阿里云的对应方案",
        "opt_cancel": "否，取消",
        "cost_note": "费用说明：{disclaimer}",
    },
}


def text(language: str, key: str, **values: Any) -> str:
    """The sentence ``key`` in ``language`` (English when not translated), formatted with ``values``."""
    table = TEXTS.get(language, TEXTS["en"])
    return table.get(key, TEXTS["en"][key]).format(**values)
