// Draws the Mermaid flowcharts the pipeline sends (``flowchart LR|TD``: nodes, subgraphs, -->, -.->,
// labelled edges) as SVG built node by node: labels are text nodes, colours are SVG attributes (no
// style element, so the strict CSP holds). Anything it cannot read is still shown as the source text.

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 150;
const NODE_H = 40;
const GAP_X = 60;
const GAP_Y = 24;
const PAD = 16;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

const SHAPES = [
  [/^\(\[\s*"?(.*?)"?\s*\]\)$/, "stadium"],
  [/^\[\(\s*"?(.*?)"?\s*\)\]$/, "cylinder"],
  [/^\(\(\s*"?(.*?)"?\s*\)\)$/, "circle"],
  [/^\[\s*"?(.*?)"?\s*\]$/, "rect"],
  [/^\(\s*"?(.*?)"?\s*\)$/, "round"],
  [/^\{\s*"?(.*?)"?\s*\}$/, "diamond"],
];
const NODE = /^([A-Za-z0-9_]+)\s*(\(\[.*\]\)|\[\(.*\)\]|\(\(.*\)\)|\[.*\]|\(.*\)|\{.*\})$/;
const EDGE = /^([A-Za-z0-9_]+)\s*(?:-\.\s*(.+?)\s*\.->|--\s+(.+?)\s+-->|(-\.->|-->|==>|---))\s*(?:\|([^|]*)\|)?\s*([A-Za-z0-9_]+)$/;

/** {direction, nodes: Map(id -> {label, shape, group}), edges: [{from, to, label, dotted}], groups: [{id, label, nodes}]} */
export function parseFlowchart(source) {
  const lines = String(source).split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("%%"));
  const head = /^(?:flowchart|graph)\s+(LR|RL|TD|TB|BT)?/i.exec(lines[0] || "");
  if (!head) return null;
  const result = { direction: (head[1] || "TD").toUpperCase(), nodes: new Map(), edges: [], groups: [] };
  const stack = [];
  const node = (id, label, shape) => {
    let n = result.nodes.get(id);
    if (!n) { n = { id, label: id, shape: "rect", group: stack.length ? stack[stack.length - 1] : null }; result.nodes.set(id, n); }
    if (label !== undefined) { n.label = label; n.shape = shape; }
    if (n.group) n.group.nodes.add(id);
    return n;
  };
  for (const line of lines.slice(1)) {
    let m;
    if ((m = /^subgraph\s+([A-Za-z0-9_]+)\s*(?:\[\s*"?(.*?)"?\s*\])?$/.exec(line))) {
      const group = { id: m[1], label: m[2] || m[1], nodes: new Set() };
      result.groups.push(group);
      stack.push(group);
    } else if (line === "end") {
      stack.pop();
    } else if ((m = EDGE.exec(line))) {
      node(m[1]);
      node(m[6]);
      result.edges.push({ from: m[1], to: m[6], label: m[2] || m[3] || m[5] || "", dotted: Boolean(m[2]) || m[4] === "-.->" });
    } else if ((m = NODE.exec(line))) {
      const [, id, body] = m;
      const shaped = SHAPES.map(([re, shape]) => [re.exec(body), shape]).find(([hit]) => hit);
      node(id, shaped ? shaped[0][1] : body, shaped ? shaped[1] : "rect");
    } else {
      return null; // something this reader does not know: show the source instead
    }
  }
  return result;
}

function layers(chart) {
  const layer = new Map([...chart.nodes.keys()].map((id) => [id, 0]));
  for (let round = 0; round < chart.nodes.size; round += 1) {
    let changed = false;
    for (const e of chart.edges) {
      if (e.from === e.to) continue;
      const want = layer.get(e.from) + 1;
      if (want > layer.get(e.to) && want < chart.nodes.size) { layer.set(e.to, want); changed = true; }
    }
    if (!changed) break;
  }
  return layer;
}

/** An <svg> of the flowchart, or null when the source is not a flowchart this reader knows. */
export function drawFlowchart(source) {
  const chart = parseFlowchart(source);
  if (!chart || chart.nodes.size === 0) return null;
  const horizontal = chart.direction === "LR" || chart.direction === "RL";
  const layer = layers(chart);
  const slots = new Map();
  const place = new Map();
  for (const id of chart.nodes.keys()) {
    const l = layer.get(id);
    const slot = slots.get(l) || 0;
    slots.set(l, slot + 1);
    const along = PAD * 2 + l * ((horizontal ? NODE_W : NODE_H) + GAP_X);
    const across = PAD * 2 + slot * ((horizontal ? NODE_H : NODE_W) + GAP_Y);
    place.set(id, horizontal ? { x: along, y: across } : { x: across, y: along });
  }
  const maxX = Math.max(...[...place.values()].map((p) => p.x)) + NODE_W + PAD * 2;
  const maxY = Math.max(...[...place.values()].map((p) => p.y)) + NODE_H + PAD * 2;
  const root = svg("svg", { viewBox: `0 0 ${maxX} ${maxY}`, width: maxX, height: maxY, class: "diagram", role: "img" });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#57606a" }));
  defs.append(marker);
  root.append(defs);
  for (const group of chart.groups) {
    const members = [...group.nodes].map((id) => place.get(id)).filter(Boolean);
    if (!members.length) continue;
    const x = Math.min(...members.map((p) => p.x)) - 10;
    const y = Math.min(...members.map((p) => p.y)) - 22;
    const w = Math.max(...members.map((p) => p.x)) + NODE_W + 10 - x;
    const h = Math.max(...members.map((p) => p.y)) + NODE_H + 10 - y;
    root.append(svg("rect", { x, y, width: w, height: h, rx: 6, fill: "#f6f8fa", stroke: "#8c959f", "stroke-dasharray": "4 3", class: "group" }));
    root.append(svg("text", { x: x + 6, y: y + 14, "font-size": 11, fill: "#57606a" }, group.label));
  }
  for (const e of chart.edges) {
    const a = place.get(e.from);
    const b = place.get(e.to);
    const [x1, y1, x2, y2] = horizontal
      ? [a.x + NODE_W, a.y + NODE_H / 2, b.x, b.y + NODE_H / 2]
      : [a.x + NODE_W / 2, a.y + NODE_H, b.x + NODE_W / 2, b.y];
    root.append(svg("line", { x1, y1, x2, y2, stroke: "#57606a", "stroke-width": 1.5, "marker-end": "url(#arrow)",
      "stroke-dasharray": e.dotted ? "4 3" : "none", class: "edge" }));
    if (e.label) root.append(svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, "font-size": 10, "text-anchor": "middle", fill: "#57606a" }, e.label));
  }
  for (const n of chart.nodes.values()) {
    const p = place.get(n.id);
    const rx = n.shape === "stadium" || n.shape === "circle" ? NODE_H / 2 : n.shape === "cylinder" ? 12 : n.shape === "round" ? 8 : 3;
    const fill = n.shape === "cylinder" ? "#fff8c5" : n.shape === "stadium" ? "#ddf4ff" : "#ffffff";
    const g = svg("g", { class: "node", "data-id": n.id });
    g.append(svg("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx, fill, stroke: "#1f6feb", "stroke-width": 1.2 }));
    g.append(svg("text", { x: p.x + NODE_W / 2, y: p.y + NODE_H / 2 + 4, "font-size": 12, "text-anchor": "middle", fill: "#1f2328" },
      n.label.length > 24 ? `${n.label.slice(0, 23)}…` : n.label));
    root.append(g);
  }
  return root;
}
