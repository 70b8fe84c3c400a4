// The console: a hash router over three views (tasks, one task, metrics) and the sign-in form.
import { rpc, stream, get, credential, saveCredential, forgetCredential, schemesOf, Unauthorized, RpcError } from "./api.js";
import { el, clear, age, shortState } from "./dom.js";
import { Timeline, isTerminal } from "./timeline.js";
import { MetricsChart } from "./chart.js";

const main = document.getElementById("main");
const signOut = document.getElementById("sign-out");
const STATES = ["", "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED"];
const PAGE_SIZES = [25, 50, 100];

let leave = () => {};            // stops the current view's timers and streams
const sessions = new Map();      // taskId -> Session: streams started from this page, kept across views

/** A running stream's events, replayed to whichever view shows its task. */
class Session {
  constructor() {
    this.events = [];
    this.listeners = new Set();
    this.done = false;
    this.error = null;
  }

  push(result) {
    this.events.push(result);
    for (const listener of this.listeners) listener(result);
  }

  listen(listener) {
    for (const event of this.events) listener(event);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

function taskIdOf(result) {
  if (!result) return null;
  if (result.task) return result.task.id;
  if (result.statusUpdate) return result.statusUpdate.taskId;
  if (result.artifactUpdate) return result.artifactUpdate.taskId;
  return null;
}

/** Start SendStreamingMessage; resolves with the task id once the first event names it. */
function startTurn(message) {
  return new Promise((resolve, reject) => {
    const session = new Session();
    let id = message.taskId || null;
    if (id) sessions.set(id, session);
    stream("SendStreamingMessage", { message }, (result) => {
      if (!id) {
        id = taskIdOf(result) || (result.message && result.message.taskId);
        if (id) { sessions.set(id, session); resolve(id); }
      }
      session.push(result);
    }).then(() => {
      session.done = true;
      if (!id) reject(new Error("The server answered without a task."));
    }, (error) => {
      session.done = true;
      session.error = error;
      if (!id) reject(error);
      else session.push({ error });
    });
    if (id) resolve(id);
  });
}

function newMessage({ text, contextId, taskId, cwd, language, pipeline }) {
  const iac = {};
  if (pipeline) { iac.run_mode = "pipeline"; iac.candidatePresentation = "rich-v1"; }
  if (cwd) iac.cwd = cwd;
  if (language) iac.preferredLanguage = language;
  const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] };
  if (contextId) message.contextId = contextId;
  if (taskId) message.taskId = taskId;
  if (Object.keys(iac).length) message.metadata = { iac_code: iac };
  return message;
}

// ------------------------------------------------------------------ sign-in

function showSignIn(challenges, problem) {
  leave();
  leave = () => {};
  const schemes = schemesOf(challenges);
  const error = el("p", { class: "error", role: "alert", id: "sign-in-error" }, problem || "");
  const scheme = el("select", { id: "scheme", name: "scheme" },
    el("option", { value: "bearer", selected: schemes.bearer || null }, "Bearer token"),
    el("option", { value: "basic", selected: (!schemes.bearer && schemes.basic) || null }, "Basic (user and password)"),
    el("option", { value: "apikey", selected: (!schemes.bearer && !schemes.basic && schemes.apikey) || null }, "API key"));
  const token = el("input", { id: "token", type: "password", autocomplete: "off", placeholder: "token or API key" });
  const username = el("input", { id: "username", autocomplete: "username", placeholder: "user" });
  const password = el("input", { id: "password", type: "password", autocomplete: "current-password", placeholder: "password" });
  const header = el("input", { id: "api-key-header", value: schemes.apiKeyHeader });
  const basicBox = el("div", { class: "fields" }, el("label", {}, "User ", username), el("label", {}, "Password ", password));
  const tokenBox = el("div", { class: "fields" }, el("label", {}, "Token ", token));
  const headerBox = el("div", { class: "fields" }, el("label", {}, "Header ", header));
  const sync = () => {
    basicBox.hidden = scheme.value !== "basic";
    tokenBox.hidden = scheme.value === "basic";
    headerBox.hidden = scheme.value !== "apikey";
  };
  scheme.addEventListener("change", sync);
  sync();
  const form = el("form", { class: "card sign-in", id: "sign-in" },
    el("h1", {}, "Sign in"),
    el("p", { class: "muted" }, "This server asks for credentials. They stay in this tab's session storage and are sent as a header."),
    el("label", {}, "Scheme ", scheme), tokenBox, basicBox, headerBox,
    el("button", { type: "submit", class: "primary", id: "sign-in-submit" }, "Sign in"), error);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    saveCredential({ scheme: scheme.value, token: token.value, username: username.value, password: password.value, header: header.value });
    try {
      await rpc("ListTasks", { pageSize: 1 });
      signOut.hidden = false;
      route();
    } catch (e) {
      forgetCredential();
      error.textContent = e instanceof Unauthorized ? "The server refused these credentials." : `Sign-in failed: ${e.message}`;
    }
  });
  clear(main).append(form);
  signOut.hidden = true;
}

function failed(error, where) {
  if (error instanceof Unauthorized) {
    const had = credential();
    forgetCredential();
    showSignIn(error.challenges, had ? "Your credentials were refused; sign in again." : "");
    return true;
  }
  if (where) where.textContent = error instanceof RpcError ? `Error ${error.code ?? ""}: ${error.message}` : String(error.message || error);
  return false;
}

// ------------------------------------------------------------------ composer

function composer({ contextId = "", taskId = "", pipeline = false, onStarted }) {
  const prompt = el("textarea", { id: "prompt", rows: 3, placeholder: contextId ? "Follow up…" : "Describe the infrastructure you need…", required: true });
  const cwd = el("input", { id: "cwd", placeholder: "workspace (absolute path, optional)" });
  const language = el("select", { id: "language" }, el("option", { value: "en" }, "English"), el("option", { value: "zh" }, "中文"));
  const context = el("input", { id: "context-id", value: contextId, placeholder: "context id (optional)" });
  const status = el("span", { class: "error", id: "composer-error" });
  const mode = el("input", { type: "checkbox", id: "pipeline-mode", checked: pipeline || null });
  const form = el("form", { class: "composer card", id: "composer" },
    prompt,
    el("div", { class: "row" }, el("label", {}, "Workspace ", cwd), el("label", {}, "Language ", language),
      el("label", {}, "Context ", context), el("label", {}, mode, " Pipeline mode"),
      el("button", { type: "submit", class: "primary", id: "send" }, contextId ? "Send" : "Start task"), status));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "";
    const text = prompt.value.trim();
    if (!text) return;
    const message = newMessage({ text, contextId: context.value.trim(), taskId, cwd: cwd.value.trim(), language: language.value,
      pipeline: mode.checked });
    try {
      const id = await startTurn(message);
      prompt.value = "";
      onStarted(id);
    } catch (error) {
      failed(error, status);
    }
  });
  return form;
}

// ------------------------------------------------------------------ tasks list

function lastText(task) {
  const messages = [task.status && task.status.message, ...(task.history || []).slice().reverse()].filter(Boolean);
  for (const m of messages) {
    const text = (m.parts || []).filter((p) => typeof p.text === "string").map((p) => p.text).join("").trim();
    if (text) return text.length > 140 ? `${text.slice(0, 140)}…` : text;
  }
  return "";
}

function showTasks(query) {
  const state = el("select", { id: "filter-state" }, ...STATES.map((s) => el("option", { value: s, selected: s === (query.get("state") || "") || null }, s ? shortState(s) : "any state")));
  const context = el("input", { id: "filter-context", value: query.get("context") || "", placeholder: "context id" });
  const wanted = Number(query.get("size")) || PAGE_SIZES[0];
  const size = el("select", { id: "page-size" }, ...PAGE_SIZES.map((n) => el("option", { value: n, selected: n === wanted || null }, `${n} per page`)));
  const body = el("tbody", { id: "task-rows" });
  const info = el("span", { class: "muted", id: "task-count" });
  const error = el("p", { class: "error", id: "tasks-error" });
  const prev = el("button", { type: "button", id: "page-prev", disabled: true }, "Previous");
  const next = el("button", { type: "button", id: "page-next", disabled: true }, "Next");
  const tokens = [""];
  let page = 0;
  let inFlight = false;
  let timer = null;

  const load = async () => {
    if (inFlight) return;
    inFlight = true;
    const params = { pageSize: Number(size.value), historyLength: 1 };
    if (state.value) params.status = state.value;
    if (context.value.trim()) params.contextId = context.value.trim();
    if (tokens[page]) params.pageToken = tokens[page];
    try {
      const result = await rpc("ListTasks", params);
      error.textContent = "";
      const rows = (result.tasks || []).map((task) => el("tr", { "data-task": task.id, "data-state": task.status && task.status.state },
        el("td", {}, el("span", { class: `state state-${shortState(task.status && task.status.state)}` }, shortState(task.status && task.status.state))),
        el("td", {}, el("a", { href: `#/task/${encodeURIComponent(task.id)}`, class: "task-link" }, task.id.slice(0, 8))),
        el("td", {}, el("a", { href: `#/?context=${encodeURIComponent(task.contextId || "")}`, class: "context-link" }, String(task.contextId || "").slice(0, 8))),
        el("td", {}, age(task.status && task.status.timestamp)),
        el("td", { class: "last" }, lastText(task))));
      clear(body).append(...rows);
      info.textContent = `${result.totalSize ?? rows.length} task(s)`;
      tokens[page + 1] = result.nextPageToken || "";
      next.disabled = !result.nextPageToken;
      prev.disabled = page === 0;
    } catch (e) {
      if (failed(e, error)) leave();
    } finally {
      inFlight = false;
    }
  };
  const refilter = () => {
    const q = new URLSearchParams();
    if (state.value) q.set("state", state.value);
    if (context.value.trim()) q.set("context", context.value.trim());
    if (Number(size.value) !== PAGE_SIZES[0]) q.set("size", size.value);
    const hash = `#/${q.toString() ? `?${q}` : ""}`;
    if (location.hash !== hash) location.hash = hash;
    else { tokens.length = 1; page = 0; load(); }
  };
  state.addEventListener("change", refilter);
  context.addEventListener("change", refilter);
  size.addEventListener("change", refilter);
  next.addEventListener("click", () => { page += 1; load(); });
  prev.addEventListener("click", () => { page = Math.max(0, page - 1); load(); });

  clear(main).append(
    composer({ onStarted: (id) => { location.hash = `#/task/${encodeURIComponent(id)}`; } }),
    el("section", { class: "card" },
      el("div", { class: "row" }, el("h2", {}, "Tasks"), info, el("label", {}, "State ", state), el("label", {}, "Context ", context), size),
      error,
      el("table", { class: "tasks" },
        el("thead", {}, el("tr", {}, el("th", {}, "State"), el("th", {}, "Task"), el("th", {}, "Context"), el("th", {}, "Age"), el("th", {}, "Last message"))),
        body),
      el("div", { class: "row" }, prev, next)));
  load();
  timer = setInterval(load, 3000);
  return () => clearInterval(timer);
}

// ------------------------------------------------------------------ one task

function showTask(taskId) {
  const list = el("ol", { class: "timeline", id: "timeline" });
  const artifacts = el("div", { class: "artifacts", id: "artifacts" });
  const stateBadge = el("span", { class: "state", id: "task-state" });
  const error = el("p", { class: "error", id: "task-error" });
  const cancel = el("button", { type: "button", class: "danger", id: "cancel", disabled: true }, "Cancel");
  const contextText = el("code", { id: "task-context" });
  const follow = el("div", { id: "follow-up" });
  let stopListening = () => {};
  let abort = null;
  let closed = false;

  const timeline = new Timeline(list, artifacts, async (envelope, decision) => {
    const answer = {
      messageId: crypto.randomUUID(), role: "ROLE_USER", taskId: envelope.requestTaskId, contextId: envelope.contextId,
      parts: [{ mediaType: "application/json", data: { schemaVersion: 1, kind: "permission", requestTaskId: envelope.requestTaskId,
        inputId: envelope.inputId, toolUseId: envelope.toolUseId, decision } }],
    };
    await startTurn(answer);
    attach();
  }, onState, async (text) => {
    await startTurn(newMessage({ text, contextId: timeline.task.contextId, taskId, pipeline: true }));
    attach();
  });

  function onState(state, task) {
    stateBadge.textContent = shortState(state);
    stateBadge.className = `state state-${shortState(state)}`;
    main.dataset.state = state;
    cancel.disabled = isTerminal(state);
    if (task && task.contextId) contextText.textContent = task.contextId;
    if (task && task.contextId && !follow.firstChild) {
      follow.append(composer({ contextId: task.contextId, taskId: isTerminal(state) ? "" : task.id,
        pipeline: Boolean(timeline.pipeline.progress),
        onStarted: (id) => { if (id === taskId) attach(); else location.hash = `#/task/${encodeURIComponent(id)}`; } }));
    }
  }

  // A pipeline task's events so far (its cards and progress), from the pipeline state endpoint.
  async function pipelineHistory(task) {
    try {
      const response = await get(`/iac-code/pipeline/state?taskId=${encodeURIComponent(task.id)}&lean=1`);
      const body = await response.json();
      for (const event of body.events || []) if (!event.taskId || event.taskId === task.id) timeline.pipeline.event(event);
    } catch (e) {
      if (e instanceof Unauthorized) throw e; // not a pipeline task (404) or no pipeline plugin: nothing to show
    }
  }

  const onEvent = (result) => {
    if (result && result.error) { failed(result.error, error); return; }
    timeline.handle(result);
  };

  // Follow the task's events: a stream this page started, else SubscribeToTask (after a reload).
  function attach() {
    if (closed) return;
    stopListening();
    const session = sessions.get(taskId);
    if (session) {  // replays what it already carried, then follows it
      stopListening = session.listen(onEvent);
      main.dataset.live = session.done ? "ended" : "stream";
      return;
    }
    if (isTerminal(timeline.state)) return;
    abort = new AbortController();
    main.dataset.live = "subscribed";
    stream("SubscribeToTask", { id: taskId }, onEvent, { signal: abort.signal }).then(() => {
      if (!closed) main.dataset.live = "ended";
    }, (e) => {
      if (!closed && e.name !== "AbortError") failed(e, error);
    });
  }

  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      const task = await rpc("CancelTask", { id: taskId });
      timeline.handle({ task });
    } catch (e) {
      failed(e, error);
      cancel.disabled = false;
    }
  });

  const pushList = el("ul", { class: "push-configs", id: "push-configs" });
  const pushStatus = el("p", { class: "muted", id: "push-status" });
  const pushBox = el("section", { class: "card" }, el("h3", {}, "Push configurations"), pushList, pushStatus);

  // The caller's push configurations of this task (ListTaskPushNotificationConfigs), each deletable.
  async function loadPush() {
    try {
      const result = await rpc("ListTaskPushNotificationConfigs", { taskId });
      const configs = result.configs || [];
      clear(pushList).append(...configs.map((config) => el("li", { "data-push": config.id },
        el("code", {}, String(config.id || "")), " → ", el("span", { class: "push-url" }, String(config.url || "")),
        config.token ? el("span", { class: "muted" }, " (token set)") : null, " ",
        el("button", { type: "button", class: "danger push-delete", onclick: async () => {
          try {
            await rpc("DeleteTaskPushNotificationConfig", { taskId, id: config.id });
            loadPush();
          } catch (e) { failed(e, pushStatus); }
        } }, "Delete"))));
      pushStatus.textContent = configs.length ? "" : "None for this task.";
    } catch (e) {
      if (!failed(e, pushStatus) && e instanceof RpcError && e.code === -32003) pushStatus.textContent = "Push notifications are off on this server.";
    }
  }

  clear(main).append(
    el("section", { class: "card task-head" },
      el("div", { class: "row" }, el("a", { href: "#/" }, "← Tasks"), el("h2", {}, "Task ", el("code", { id: "task-id" }, taskId)), stateBadge, cancel),
      el("div", { class: "muted" }, "Context ", contextText), error),
    el("div", { class: "task-body" },
      el("section", { class: "card" }, el("h3", {}, "Timeline"), list),
      el("section", { class: "card" }, el("h3", {}, "Artifacts"), artifacts)),
    pushBox, follow);
  loadPush();

  const session = sessions.get(taskId);
  if (session) {
    attach();
  } else {
    rpc("GetTask", { id: taskId }).then(async (task) => {
      timeline.handle({ task });
      await pipelineHistory(task);
      attach();
    }, (e) => failed(e, error));
  }
  return () => {
    closed = true;
    stopListening();
    if (abort) abort.abort();
  };
}

// ------------------------------------------------------------------ metrics

function showMetrics() {
  const canvas = el("canvas", { id: "metrics-chart", width: 720, height: 260 });
  const status = el("p", { class: "error", id: "metrics-error" });
  const legend = el("ul", { class: "legend" },
    el("li", { class: "l-requests" }, "requests/s"), el("li", { class: "l-streams" }, "open streams"), el("li", { class: "l-turns" }, "active turns"));
  clear(main).append(el("section", { class: "card" }, el("h2", {}, "Server metrics"), legend, canvas, status));
  const chart = new MetricsChart(canvas, status);
  chart.start(1000);
  return () => chart.stop();
}

// ------------------------------------------------------------------ router

function route() {
  leave();
  leave = () => {};
  const hash = location.hash || "#/";
  const [path, queryText] = hash.slice(1).split("?");
  const query = new URLSearchParams(queryText || "");
  signOut.hidden = !credential();
  const task = /^\/task\/(.+)$/.exec(path);
  if (task) leave = showTask(decodeURIComponent(task[1]));
  else if (path === "/metrics") leave = showMetrics();
  else leave = showTasks(query);
}

signOut.addEventListener("click", () => {
  forgetCredential();
  rpc("ListTasks", { pageSize: 1 }).then(() => route(), (e) => failed(e));
});
window.addEventListener("hashchange", route);
route();
