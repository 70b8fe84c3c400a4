// End to end with @a2a-js/sdk's own client (ClientFactory, as its README shows it), against a
// running iac-code A2A server with the default configuration (writes ask permission).
//
//   node tests/interop_js/a2a_js_e2e.mjs <base-url> <workspace-dir> <JSONRPC|HTTP+JSON> [bearer-token]
//
// Prints one line per check ("ok <name>" or "FAIL <name>: <why>") and exits 1 if any failed.
// Run by tests/test_interop_js.py (marker `interop`), which starts the server and installs the SDK.
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";
import { randomUUID } from "node:crypto";

const [base, workspace, binding, token] = process.argv.slice(2);
if (!base || !workspace || !binding) {
  console.error("usage: a2a_js_e2e.mjs <base-url> <workspace-dir> <JSONRPC|HTTP+JSON> [bearer-token]");
  process.exit(2);
}
const headers = token ? { Authorization: `Bearer ${token}` } : {};
let failures = 0;

function check(name, ok, why = "") {
  if (ok) console.log(`ok ${binding} ${name}`);
  else {
    failures += 1;
    console.log(`FAIL ${binding} ${name}: ${why}`);
  }
}

const text = (value) => ({ content: { $case: "text", value } });
const partText = (part) => (part?.content?.$case === "text" ? part.content.value : "");
const messageText = (message) => (message?.parts ?? []).map(partText).join("");
const stateName = (state) => TaskState[state] ?? String(state);

function userMessage(parts, extra = {}) {
  return {
    messageId: randomUUID(), role: Role.ROLE_USER, parts,
    metadata: { iac_code: { cwd: workspace } }, ...extra,
  };
}

async function collect(stream, limit = 200) {
  const events = [];
  for await (const event of stream) {
    events.push(event);
    if (events.length >= limit) break;
  }
  return events;
}

const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  preferredTransports: [binding],
  clientConfig: token ? { interceptors: [{
    before: async (args) => { args.options = { ...(args.options ?? {}), serviceParameters: { ...(args.options?.serviceParameters ?? {}), ...headers } }; },
    after: async () => {},
  }] } : undefined,
});
const factory = new ClientFactory(options);
const client = await factory.createFromUrl(base);

// A section that throws is one failed check; the later sections still run.
async function section(name, body) {
  try {
    await body();
  } catch (err) {
    check(name, false, `${err?.name ?? "Error"}: ${err?.message ?? err}`);
  }
}
let taskId, contextId, answered;

// 1. A generating turn, streamed: it pauses for the permission to write the template, and a
//    generic client sees the question as text in status.message.
await section("streamed turn", async () => {
const events = await collect(client.sendMessageStream({ message: userMessage([text("Create a VPC with two vSwitches.")]) }));
const last = events.at(-1)?.payload;
const pausedStatus = last?.$case === "statusUpdate" ? last.value.status : last?.value?.status;
taskId = last?.value?.taskId || last?.value?.id;
contextId = last?.value?.contextId;
check("stream pauses in INPUT_REQUIRED", pausedStatus?.state === TaskState.TASK_STATE_INPUT_REQUIRED,
  `last event ${last?.$case} state ${stateName(pausedStatus?.state)}`);
const question = messageText(pausedStatus?.message);
check("pause question is text in status.message", /allow/i.test(question) && /deny/i.test(question),
  JSON.stringify(question));
});

// 2. The permission answered by plain text; the answer read where generic clients look.
await section("text answer", async () => {
answered = await client.sendMessage({ message: userMessage([text("allow")], { taskId, contextId }) });
check("text answer accepted", answered?.id === taskId, JSON.stringify(answered)?.slice(0, 300));
check("turn ends in INPUT_REQUIRED", answered?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED,
  stateName(answered?.status?.state));
const answer = messageText(answered?.status?.message);
check("final answer in status.message", answer.length > 0, JSON.stringify(answered?.status));
const history = (await client.getTask({ id: taskId })).history ?? [];
const copies = history.filter((m) => m.role === Role.ROLE_AGENT && messageText(m) === answer).length;
check("final answer not copied into history", copies === 0, `${copies} copies in history`);
});

// 3. The template artifact, fetched by the URL in its part (no server path in it).
await section("artifact", async () => {
const parts = (answered?.artifacts ?? []).flatMap((a) => a.parts ?? []);
const urlPart = parts.find((p) => p.content?.$case === "url");
const url = urlPart?.content?.value ?? "";
check("artifact part has an http URL", /^https?:\/\//.test(url), JSON.stringify(parts).slice(0, 300));
if (url) {
  const response = await fetch(url, { headers });
  const body = await response.text();
  check("artifact URL serves the template", response.ok && /ROSTemplateFormatVersion|resource\s+"/.test(body),
    `HTTP ${response.status} ${body.slice(0, 120)}`);
  check("artifact has an ETag", Boolean(response.headers.get("etag")), "no ETag");
  const inline = parts.map(partText).find((t) => t.length > 0);
  if (inline) check("inline text equals the served file", inline === body, "inline text differs from the URL's body");
}
check("no file:// in the task", !JSON.stringify(answered).includes("file://"), "a file:// URL is in the task");
});

// 4. Resubscribe to the idle task: the current Task first, then the next turn, then the end.
await section("resubscribe", async () => {
const subscription = client.resubscribeTask({ id: taskId });
const first = await subscription.next();
check("resubscribe opens with the Task", first.value?.payload?.$case === "task"
  && first.value.payload.value.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED,
  JSON.stringify(first.value)?.slice(0, 200));
const followUp = client.sendMessage({ message: userMessage([text("What does the template contain?")], { taskId, contextId }) });
const rest = [];
for await (const event of { [Symbol.asyncIterator]: () => subscription }) {
  rest.push(event);
  if (rest.length > 500) break;
}
await followUp;
const states = rest.filter((e) => e.payload?.$case === "statusUpdate").map((e) => e.payload.value.status?.state);
check("resubscription carries the next turn and ends with it",
  states.includes(TaskState.TASK_STATE_WORKING) && states.at(-1) === TaskState.TASK_STATE_INPUT_REQUIRED,
  `states ${states.map(stateName).join(",")}`);
});

// 5. File parts round-trip byte for byte: binary and text/plain bytes.
await section("file parts", async () => {
const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const utf8 = Buffer.from("héllo, 世界\n", "utf-8");
const sent = await client.sendMessage({ message: userMessage([
  text("Here are two files."),
  { content: { $case: "raw", value: binary }, mediaType: "application/octet-stream", filename: "blob.bin" },
  { content: { $case: "raw", value: utf8 }, mediaType: "text/plain", filename: "note.txt" },
]) });
const stored = await client.getTask({ id: sent?.id ?? sent?.taskId });
const rawParts = (stored.history ?? []).filter((m) => m.role === Role.ROLE_USER)
  .flatMap((m) => m.parts ?? []).filter((p) => p.content?.$case === "raw");
const byName = Object.fromEntries(rawParts.map((p) => [p.filename, Buffer.from(p.content.value)]));
check("binary part byte-exact", byName["blob.bin"]?.equals(binary) === true, `got ${byName["blob.bin"]?.toString("hex")?.slice(0, 40)}`);
check("text/plain bytes byte-exact", byName["note.txt"]?.equals(utf8) === true, `got ${byName["note.txt"]?.toString("hex")}`);
});

console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
