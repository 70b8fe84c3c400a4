// The console's only way to the server: the public A2A JSON-RPC API (POST /), its SSE streams,
// GET /iac-code/pipeline/state and GET /metrics. The credential lives in sessionStorage and travels
// as a header, never in a URL.

const KEY = "iac-code-console.credential";
let rpcId = 0;

export class Unauthorized extends Error {
  constructor(challenges) {
    super("Unauthorized");
    this.challenges = challenges || "";
  }
}

export class RpcError extends Error {
  constructor(error) {
    super(error && error.message ? String(error.message) : "Request failed");
    this.code = error && error.code;
    this.data = error && error.data;
  }
}

/** {scheme: "bearer"|"basic"|"apikey", token, username, password, header} or null. */
export function credential() {
  try {
    const raw = sessionStorage.getItem(KEY);
    return raw ? JSON.parse(raw) : null;
  } catch {
    return null;
  }
}

export function saveCredential(value) {
  sessionStorage.setItem(KEY, JSON.stringify(value));
}

export function forgetCredential() {
  sessionStorage.removeItem(KEY);
}

function utf8Base64(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export function authHeaders(value = credential()) {
  if (!value) return {};
  if (value.scheme === "bearer") return { Authorization: `Bearer ${value.token}` };
  if (value.scheme === "basic") return { Authorization: `Basic ${utf8Base64(`${value.username}:${value.password}`)}` };
  if (value.scheme === "apikey") return { [value.header || "X-API-Key"]: value.token };
  return {};
}

function headers(extra = {}) {
  return { "A2A-Version": "1.0", "Content-Type": "application/json", ...authHeaders(), ...extra };
}

async function send(path, init) {
  const response = await fetch(path, { credentials: "omit", cache: "no-store", ...init });
  if (response.status === 401) throw new Unauthorized(response.headers.get("WWW-Authenticate"));
  return response;
}

/** One JSON-RPC call; returns ``result`` or throws RpcError / Unauthorized. */
export async function rpc(method, params = {}) {
  const response = await send("/", {
    method: "POST", headers: headers(),
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params }),
  });
  let body;
  try {
    body = await response.json();
  } catch {
    throw new RpcError({ message: `HTTP ${response.status}` });
  }
  if (body.error) throw new RpcError(body.error);
  return body.result;
}

/**
 * A streaming JSON-RPC call (SendStreamingMessage, SubscribeToTask): calls onEvent(result, id) for
 * every SSE frame until the stream ends or ``signal`` aborts. Returns the last event id seen.
 */
export async function stream(method, params, onEvent, { signal, lastEventId } = {}) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId) extra["Last-Event-ID"] = lastEventId;
  const response = await send("/", {
    method: "POST", headers: headers(extra), signal,
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params }),
  });
  const type = response.headers.get("Content-Type") || "";
  if (!type.startsWith("text/event-stream")) {
    const body = await response.json().catch(() => ({}));
    if (body.error) throw new RpcError(body.error);
    if (body.result) onEvent(body.result, null);
    return null;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let last = lastEventId || null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let data = "";
      let id = null;
      for (const line of frame.split("\n")) {
        if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (!data) continue;
      const message = JSON.parse(data);
      if (id) last = id;
      if (message.error) throw new RpcError(message.error);
      onEvent(message.result, id);
    }
  }
  return last;
}

/** GET a server path with the credential (``/metrics``, ``/iac-code/pipeline/state``, artifacts). */
export async function get(path) {
  const response = await send(path, { headers: { "A2A-Version": "1.0", ...authHeaders() } });
  if (!response.ok) throw new RpcError({ message: `HTTP ${response.status}` });
  return response;
}

/** Which schemes the server asks for, from its WWW-Authenticate challenges. */
export function schemesOf(challenges) {
  const text = String(challenges || "");
  const header = /ApiKey[^,]*?(?:,\s*)?header="([^"]+)"/i.exec(text);
  return {
    bearer: /\bBearer\b/i.test(text),
    basic: /\bBasic\b/i.test(text),
    apikey: /\bApiKey\b/i.test(text),
    apiKeyHeader: header ? header[1] : "X-API-Key",
  };
}
