// The live metrics chart: polls GET /metrics (Prometheus text) and draws three series on a canvas.
import { get } from "./api.js";

/** {name -> summed value} of the samples in a Prometheus text exposition. */
export function parseMetrics(text) {
  const sums = {};
  for (const line of String(text).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([^\s]+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (Number.isFinite(value)) sums[m[1]] = (sums[m[1]] || 0) + value;
  }
  return sums;
}

export const SERIES = [
  { key: "requests", label: "requests/s", color: "#1f6feb" },
  { key: "streams", label: "open streams", color: "#d97706" },
  { key: "turns", label: "active turns", color: "#16a34a" },
];

export class MetricsChart {
  constructor(canvas, status) {
    this.canvas = canvas;
    this.status = status;
    this.points = [];
    this.previous = null;
    this.timer = null;
  }

  async sample() {
    const response = await get("/metrics");
    const sums = parseMetrics(await response.text());
    const now = performance.now() / 1000;
    const total = sums.iac_code_a2a_requests_total || 0;
    let rate = 0;
    if (this.previous) rate = Math.max(0, (total - this.previous.total) / Math.max(0.001, now - this.previous.at));
    this.previous = { total, at: now };
    this.points.push({ requests: rate, streams: sums.iac_code_a2a_open_streams || 0, turns: sums.iac_code_a2a_turns_active || 0 });
    if (this.points.length > 60) this.points.shift();
    this.draw();
  }

  start(intervalMs = 1000) {
    const tick = () => this.sample().then(
      () => { this.status.textContent = ""; },
      (error) => { this.status.textContent = `Metrics unavailable: ${error.message}`; },
    );
    tick();
    this.timer = setInterval(tick, intervalMs);
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  draw() {
    const { canvas } = this;
    const ctx = canvas.getContext("2d");
    const w = canvas.width;
    const h = canvas.height;
    const pad = 30;
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, w, h);
    ctx.strokeStyle = "#d0d7de";
    ctx.lineWidth = 1;
    ctx.strokeRect(pad, 10, w - pad - 10, h - pad - 10);
    const max = Math.max(1, ...this.points.flatMap((p) => SERIES.map((s) => p[s.key])));
    ctx.fillStyle = "#57606a";
    ctx.font = "11px sans-serif";
    ctx.fillText(max.toFixed(max < 10 ? 1 : 0), 2, 18);
    ctx.fillText("0", 2, h - pad);
    const step = (w - pad - 10) / 59;
    for (const series of SERIES) {
      ctx.strokeStyle = series.color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      this.points.forEach((p, i) => {
        const x = pad + i * step;
        const y = h - pad - (p[series.key] / max) * (h - pad - 20);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
    }
    canvas.dataset.points = String(this.points.length);
  }
}
