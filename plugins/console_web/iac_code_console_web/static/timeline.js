// A task's live timeline: its history and every stream event (text, tools, permissions, usage,
// artifacts, findings), deduplicated so a resumed stream or a replayed history shows each item once.
import { el, clear, shortState } from "./dom.js";
import { highlight, languageOf } from "./highlight.js";
import { PipelinePanel } from "./pipeline.js";

const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);

export function isTerminal(state) {
  return TERMINAL.has(state);
}

function textOf(message) {
  return (message && message.parts ? message.parts : []).filter((p) => typeof p.text === "string").map((p) => p.text).join("");
}

function dataParts(message) {
  return (message && message.parts ? message.parts : []).filter((p) => p.data && typeof p.data === "object").map((p) => p.data);
}

export class Timeline {
  /**
   * @param {HTMLElement} list      where timeline entries go
   * @param {HTMLElement} artifacts where artifacts go
   * @param {(envelope, optionId) => Promise<void>} answer  sends a permission answer
   * @param {(state, task) => void} onState  told every state change
   * @param {(text) => Promise<void>} reply  sends a text answer to a pipeline's question
   */
  constructor(list, artifacts, answer, onState, reply) {
    this.list = list;
    this.artifactsBox = artifacts;
    this.answer = answer;
    this.onState = onState;
    this.seen = new Set();
    this.tools = new Map();
    this.artifacts = new Map();
    this.questions = new Map();
    this.turnHasText = false;
    this.task = null;
    this.state = null;
    this.pipeline = new PipelinePanel((kind, ...children) => this.row(kind, ...children), reply,
      (findings, title) => this.findings(findings, title));
  }

  row(kind, ...children) {
    const node = el("li", { class: `entry entry-${kind}`, "data-kind": kind }, ...children);
    this.list.append(node);
    node.scrollIntoView({ block: "nearest" });
    return node;
  }

  setState(state) {
    if (!state || state === this.state) return;
    this.state = state;
    if (state !== "TASK_STATE_INPUT_REQUIRED") this.closeQuestions(state === "TASK_STATE_WORKING" ? "answered" : shortState(state));
    this.onState(state, this.task);
  }

  /** One stream result (or a task from GetTask): {task} | {statusUpdate} | {artifactUpdate} | {message}. */
  handle(result) {
    if (!result) return;
    if (result.task) this.taskSnapshot(result.task);
    else if (result.statusUpdate) this.statusUpdate(result.statusUpdate);
    else if (result.artifactUpdate) this.artifact(result.artifactUpdate.artifact, result.artifactUpdate.append);
    else if (result.message) this.message(result.message);
    else if (result.id && result.status) this.taskSnapshot(result);
  }

  taskSnapshot(task) {
    this.task = { id: task.id, contextId: task.contextId };
    const md0 = (task.metadata && task.metadata.iac_code) || {};
    const asking = md0.input && task.status && task.status.state === "TASK_STATE_INPUT_REQUIRED";
    const pipelineAsks = md0.pipeline && md0.pipeline.eventType === "input_required";
    const question = (asking || pipelineAsks) && task.status.message ? task.status.message.messageId : null;
    if (question) this.seen.add(question); // the question's text: shown as the question card instead
    for (const message of task.history || []) this.message(message);
    for (const artifact of task.artifacts || []) this.artifact(artifact, false);
    const md = (task.metadata && task.metadata.iac_code) || {};
    this.pipeline.fromMetadata(md);
    if (task.status && task.status.message) this.message(task.status.message, md);
    if (md.input && task.status && task.status.state === "TASK_STATE_INPUT_REQUIRED") this.question(md.input);
    if (task.status) this.setState(task.status.state);
  }

  statusUpdate(update) {
    if (!this.task) this.task = { id: update.taskId, contextId: update.contextId };
    const md = (update.metadata && update.metadata.iac_code) || {};
    const state = update.status && update.status.state;
    if (state === "TASK_STATE_WORKING" && this.state !== "TASK_STATE_WORKING" && !md.inputReceived) this.turnHasText = false;
    if (md.tool) this.tool(md.tool);
    if (md.thinking && md.thinking.text) this.thinking(String(md.thinking.text));
    this.pipeline.fromMetadata(md);
    const pipelineQuestion = md.pipeline && md.pipeline.eventType === "input_required";
    if (pipelineQuestion && update.status && update.status.message) this.seen.add(update.status.message.messageId);
    if (md.inputReceived) this.received(md.inputReceived);
    const message = update.status && update.status.message;
    if (md.input && state === "TASK_STATE_INPUT_REQUIRED") {
      if (message) this.seen.add(message.messageId);
      this.question(md.input);
    } else if (message) {
      this.message(message, md);
    }
    if (md.usage) this.usage(md.usage);
    if (md.findings) this.findings(md.findings);
    this.setState(state);
  }

  message(message, md = {}) {
    if (!message || (message.messageId && this.seen.has(message.messageId))) return;
    if (message.messageId) this.seen.add(message.messageId);
    if (message.role === "ROLE_USER") {
      this.turnHasText = false;
      const answer = dataParts(message).find((d) => d.kind === "permission");
      if (answer) return;
      this.row("user", el("span", { class: "who" }, "You"), el("div", { class: "text" }, textOf(message)));
      return;
    }
    for (const data of dataParts(message)) {
      if (data.kind === "permission_ack") this.received(data);
      if (Array.isArray(data.findings)) this.findings(data.findings);
    }
    const text = textOf(message);
    if (!text) return;
    if (md.assistantFinal && this.turnHasText) return; // the turn's text, already shown as it streamed
    this.turnHasText = true;
    const last = this.list.lastElementChild;
    if (last && last.dataset.kind === "agent" && !md.assistantFinal) {
      last.querySelector(".text").append(document.createTextNode(text));
      return;
    }
    this.row("agent", el("span", { class: "who" }, "Agent"), el("div", { class: "text" }, text));
  }

  thinking(text) {
    const last = this.list.lastElementChild;
    if (last && last.dataset.kind === "thinking") {
      last.querySelector(".text").append(document.createTextNode(text));
      return;
    }
    this.row("thinking", el("span", { class: "who" }, "Thinking"), el("div", { class: "text" }, text));
  }

  tool(tool) {
    const id = tool.toolUseId || `${tool.name}-${this.tools.size}`;
    let entry = this.tools.get(id);
    if (!entry) {
      const status = el("span", { class: "tool-status" });
      const detail = el("div", { class: "tool-detail" });
      const node = this.row("tool", el("span", { class: "who" }, "Tool"), el("code", {}, String(tool.name || "tool")), " ", status, detail);
      node.dataset.tool = String(tool.name || "");
      entry = { node, status, detail };
      this.tools.set(id, entry);
    }
    if (tool.status === "input_delta") return;
    entry.status.textContent = String(tool.status || "");
    entry.node.dataset.status = String(tool.status || "");
    if (tool.result !== undefined) {
      entry.detail.textContent = typeof tool.result === "string" ? tool.result : JSON.stringify(tool.result);
    }
  }

  question(envelope) {
    if (!envelope || envelope.kind !== "permission" || this.questions.has(envelope.inputId)) return;
    const buttons = el("div", { class: "options" });
    const status = el("span", { class: "question-status" });
    const card = this.row("question",
      el("strong", { class: "prompt" }, String(envelope.prompt || envelope.title || "Allow this tool call?")),
      envelope.purpose ? el("div", { class: "muted" }, String(envelope.purpose)) : null,
      el("div", { class: "summary" }, el("code", {}, String(envelope.safeSummary || envelope.toolName || ""))),
      buttons, status);
    card.dataset.inputId = String(envelope.inputId || "");
    const options = Array.isArray(envelope.options) && envelope.options.length ? envelope.options
      : [{ id: "allow_once", label: "Allow once" }, { id: "deny", label: "Deny" }];
    for (const option of options) {
      const button = el("button", {
        type: "button", class: option.id === "deny" ? "danger" : "primary", "data-option": String(option.id),
        onclick: async () => {
          for (const b of buttons.querySelectorAll("button")) b.disabled = true;
          status.textContent = "Sending…";
          try {
            await this.answer(envelope, String(option.id));
          } catch (error) {
            status.textContent = `Not sent: ${error.message}`;
            for (const b of buttons.querySelectorAll("button")) b.disabled = false;
          }
        },
      }, String(option.label || option.id));
      buttons.append(button);
    }
    this.questions.set(envelope.inputId, { card, buttons, status });
  }

  received(data) {
    const entry = this.questions.get(data.inputId);
    if (entry) {
      for (const b of entry.buttons.querySelectorAll("button")) b.disabled = true;
      entry.status.textContent = `Answered: ${String(data.decision || "")}`;
      entry.card.dataset.answered = String(data.decision || "yes");
    }
    const key = `ack-${data.inputId}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.row("ack", el("span", { class: "who" }, "Permission"), `${String(data.decision || "")} ${data.accepted === false ? "refused" : "accepted"}`);
  }

  closeQuestions(reason) {
    for (const entry of this.questions.values()) {
      if (entry.card.dataset.answered) continue;
      for (const b of entry.buttons.querySelectorAll("button")) b.disabled = true;
      entry.card.dataset.answered = reason;
      if (!entry.status.textContent || entry.status.textContent === "Sending…") entry.status.textContent = `Closed: ${reason}`;
    }
  }

  usage(usage) {
    const parts = Object.entries(usage).map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : v}`);
    this.row("usage", el("span", { class: "who" }, "Usage"), parts.join(" · "));
  }

  findings(findings, title = "") {
    const list = el("ul", { class: "findings" });
    for (const f of findings) {
      const severity = String(f.severity || f.level || "info").toLowerCase();
      list.append(el("li", { class: `finding sev-${severity.replace(/[^a-z]/g, "")}` },
        el("span", { class: "severity" }, severity), " ",
        f.rule ? el("code", {}, String(f.rule)) : null, " ",
        String(f.message || f.text || f.title || JSON.stringify(f)),
        f.resource || f.path ? el("span", { class: "muted" }, ` (${String(f.resource || f.path)})`) : null));
    }
    this.row("findings", el("span", { class: "who" }, "Review"), title ? el("span", { class: "findings-title" }, title) : null,
      findings.length ? list : el("div", { class: "muted" }, "No findings."));
  }

  artifact(artifact, append) {
    if (!artifact) return;
    const id = artifact.artifactId || artifact.name;
    const parts = artifact.parts || [];
    const text = parts.filter((p) => typeof p.text === "string").map((p) => p.text).join("");
    const file = parts.find((p) => p.filename || p.url) || {};
    const name = String(artifact.name || file.filename || id);
    let entry = this.artifacts.get(id);
    if (entry && append) entry.text += text;
    else if (entry) entry.text = text || entry.text;
    else {
      entry = { text, name, mediaType: String(file.mediaType || ""), box: el("section", { class: "artifact", "data-name": name }) };
      this.artifacts.set(id, entry);
      this.artifactsBox.append(entry.box);
      this.row("artifact", el("span", { class: "who" }, "Artifact"), name);
    }
    for (const data of parts.filter((p) => p.data).map((p) => p.data)) if (Array.isArray(data.findings)) this.findings(data.findings);
    this.drawArtifact(entry);
  }

  drawArtifact(entry) {
    const language = languageOf(entry.name, entry.mediaType);
    const copy = el("button", {
      type: "button", class: "copy",
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(entry.text);
          copy.textContent = "Copied";
        } catch {
          copy.textContent = "Copy failed";
        }
      },
    }, "Copy");
    const download = el("button", {
      type: "button", class: "download",
      onclick: () => {
        const url = URL.createObjectURL(new Blob([entry.text], { type: entry.mediaType || "text/plain" }));
        const a = el("a", { href: url, download: entry.name.split("/").pop() || "artifact.txt" });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 1000);
      },
    }, "Download");
    clear(entry.box).append(
      el("header", {}, el("strong", {}, entry.name), " ", el("span", { class: "muted" }, language), " ", copy, " ", download),
      highlight(entry.text, language));
  }
}
