// Pipeline mode in the timeline: the step progress, the candidates as cards (diagram, cost table,
// price source) with choose and confirm, and the pipeline's questions. Events come from the stream
// (metadata.iac_code.pipeline / pipelineBatch.events) and, after a reload, GET /iac-code/pipeline/state.
import { el } from "./dom.js";
import { drawFlowchart } from "./diagram.js";

const NOTED = new Set(["pipeline_warning", "pipeline_completed", "pipeline_canceled", "pipeline_failed",
  "pipeline_handoff_ready", "pipeline_resumed", "step_failed", "candidate_failed", "stack_progress", "cleanup_completed", "cleanup_failed"]);

export class PipelinePanel {
  /**
   * @param {(kind, ...children) => HTMLElement} row  adds a timeline entry
   * @param {(text) => Promise<void>} reply  sends an answer (text) to the waiting task
   * @param {(findings, title) => void} findings  shows review findings
   */
  constructor(row, reply, findings) {
    this.row = row;
    this.reply = reply;
    this.findings = findings;
    this.seen = new Set();
    this.steps = new Map();
    this.progress = null;
    this.prices = new Map();
    this.asked = new Set();
    this.priceSlots = new Map();
  }

  /** Every pipeline event of one status update's metadata. */
  fromMetadata(md) {
    if (md.pipeline) this.event(md.pipeline);
    if (md.pipelineBatch && Array.isArray(md.pipelineBatch.events)) for (const e of md.pipelineBatch.events) this.event(e);
  }

  ensureProgress(names) {
    if (!this.progress) {
      this.list = el("ol", { class: "steps", id: "pipeline-steps" });
      this.progress = this.row("pipeline", el("span", { class: "who" }, "Pipeline"), this.list);
    }
    for (const name of names) {
      if (this.steps.has(name)) continue;
      const item = el("li", { "data-step": name, "data-status": "pending" }, name.replace(/_/g, " "));
      this.steps.set(name, item);
      this.list.append(item);
    }
  }

  event(e) {
    if (!e || typeof e !== "object") return;
    const key = e.eventId || `${e.sequence}-${e.eventType}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    const data = e.data || {};
    const type = String(e.eventType || "");
    if (type === "pipeline_started") this.ensureProgress(Array.isArray(data.steps) ? data.steps.map(String) : []);
    const stepId = (e.step && e.step.id) || data.stepId;
    if (stepId && type.startsWith("step_")) {
      this.ensureProgress([String(stepId)]);
      this.steps.get(String(stepId)).dataset.status = type.slice(5);
    }
    if (type === "candidate_step_completed" && data.conclusion && data.conclusion.disclaimer) {
      this.prices.set(Number(data.candidateIndex), String(data.conclusion.disclaimer));
      for (const slot of this.priceSlots.get(Number(data.candidateIndex)) || []) slot.textContent = String(data.conclusion.disclaimer);
    }
    if (type === "candidate_step_completed" && data.stepId === "reviewing" && data.conclusion) {
      const c = data.conclusion;
      const counts = c.finding_counts ? Object.entries(c.finding_counts).map(([k, v]) => `${k} ${v}`).join(", ") : "";
      this.findings(Array.isArray(c.findings) ? c.findings : [],
        `${data.candidateName || `Candidate ${data.candidateIndex}`}: ${c.status || ""} (${c.reviewer || "reviewer"}${counts ? `; ${counts}` : ""})`);
    }
    if (type === "input_required") this.question(e);
    else if (NOTED.has(type)) {
      const text = data.message || data.summary || data.reason || data.outcome || "";
      this.row("pipeline-event", el("span", { class: "who" }, type.replace(/_/g, " ")), String(text));
    }
  }

  question(e) {
    const data = e.data || {};
    const id = `${(e.step && e.step.runId) || data.stepId}-${e.sequence}`;
    if (this.asked.has(id)) return;
    this.asked.add(id);
    if (data.kind === "candidate_selection") this.candidates(data);
    else this.choices(data);
  }

  candidates(data) {
    const cards = el("div", { class: "candidates", id: "candidates" });
    const status = el("span", { class: "question-status" });
    let chosen = null;
    const confirm = el("button", { type: "button", class: "primary", id: "confirm-candidate", disabled: true }, "Confirm choice");
    for (const option of data.options || []) {
      const index = Number(option.candidate_index);
      const name = String(option.name || `Candidate ${index}`);
      const choose = el("button", { type: "button", class: "choose", "data-candidate": index, "aria-pressed": "false" }, "Choose");
      const card = el("article", { class: "candidate", "data-candidate": index },
        el("h4", {}, `${index}. ${name}`),
        option.summary ? el("p", { class: "muted" }, String(option.summary)) : null,
        this.diagram(option.architecture_diagram),
        this.costs(option, index),
        choose);
      choose.addEventListener("click", () => {
        chosen = { index, name };
        for (const c of cards.querySelectorAll(".candidate")) {
          const on = c === card;
          c.dataset.chosen = on ? "true" : "false";
          c.querySelector("button.choose").setAttribute("aria-pressed", on ? "true" : "false");
        }
        confirm.disabled = false;
        confirm.textContent = `Confirm: ${name}`;
      });
      cards.append(card);
    }
    confirm.addEventListener("click", async () => {
      if (!chosen) return;
      confirm.disabled = true;
      for (const b of cards.querySelectorAll("button")) b.disabled = true;
      status.textContent = "Sending…";
      try {
        await this.reply(JSON.stringify({ selected_candidate_name: chosen.name, selected_candidate_index: chosen.index }));
        status.textContent = `Chosen: ${chosen.name}`;
      } catch (error) {
        status.textContent = `Not sent: ${error.message}`;
        confirm.disabled = false;
        for (const b of cards.querySelectorAll("button")) b.disabled = false;
      }
    });
    this.row("candidates", el("strong", { class: "prompt" }, String(data.prompt || "Choose a candidate architecture.")), cards,
      el("div", { class: "row" }, confirm, status));
  }

  diagram(source) {
    if (!source) return null;
    const drawn = drawFlowchart(String(source));
    return el("figure", { class: "diagram-box" }, drawn || el("pre", { class: "code" }, String(source)),
      el("details", {}, el("summary", {}, "Mermaid source"), el("pre", { class: "code" }, String(source))));
  }

  costs(option, index) {
    const priceSource = el("p", { class: "price-source muted" }, this.prices.get(index) || "");
    this.priceSlots.set(index, [...(this.priceSlots.get(index) || []), priceSource]);
    const items = Array.isArray(option.cost_items) ? option.cost_items : [];
    if (!items.length && !option.total_monthly_cost) return null;
    return el("div", { class: "costs" },
      el("table", { class: "cost-table" },
        el("thead", {}, el("tr", {}, el("th", {}, "Resource"), el("th", {}, "Spec"), el("th", {}, "Monthly"))),
        el("tbody", {}, ...items.map((i) => el("tr", {}, el("td", {}, String(i.name ?? "")), el("td", {}, String(i.spec ?? "")),
          el("td", {}, String(i.monthly_cost ?? ""))))),
        el("tfoot", {}, el("tr", {}, el("th", { colspan: 2 }, "Total"), el("th", { class: "total" }, String(option.total_monthly_cost ?? ""))))),
      priceSource);
  }

  choices(data) {
    const buttons = el("div", { class: "options" });
    const status = el("span", { class: "question-status" });
    for (const option of data.options || []) {
      const label = String(option.label || option.name || option.id);
      const answer = String(option.id || label);
      buttons.append(el("button", {
        type: "button", class: "primary", "data-option": answer,
        onclick: async () => {
          for (const b of buttons.querySelectorAll("button")) b.disabled = true;
          try { await this.reply(answer); status.textContent = `Answered: ${label}`; } catch (error) { status.textContent = `Not sent: ${error.message}`; }
        },
      }, label));
    }
    const free = el("input", { class: "free-text", placeholder: String(data.freeTextPrompt || "Or type an answer") });
    const form = data.allowFreeText ? el("form", { class: "row" }, free, el("button", { type: "submit" }, "Send")) : null;
    if (form) form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!free.value.trim()) return;
      try { await this.reply(free.value); status.textContent = "Answered"; } catch (error) { status.textContent = `Not sent: ${error.message}`; }
    });
    this.row("question", el("strong", { class: "prompt" }, String(data.prompt || data.question || "")), buttons, form, status);
  }
}
