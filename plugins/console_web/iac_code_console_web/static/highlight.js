// A tiny syntax highlighter for ROS YAML, JSON and Terraform (HCL): regex tokens to <span> text nodes.
import { el } from "./dom.js";

const RULES = {
  yaml: [
    [/#.*$/y, "tok-comment"],
    [/(?:-\s+)?[A-Za-z0-9_.:/-]+(?=:(\s|$))/y, "tok-key"],
    [/"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'/y, "tok-string"],
    [/\b(?:true|false|null|yes|no|~)\b/y, "tok-literal"],
    [/-?\b\d+(?:\.\d+)?\b/y, "tok-number"],
    [/![A-Za-z:]+|\b(?:Fn::[A-Za-z]+|Ref)\b/y, "tok-keyword"],
  ],
  json: [
    [/"(?:[^"\\]|\\.)*"(?=\s*:)/y, "tok-key"],
    [/"(?:[^"\\]|\\.)*"/y, "tok-string"],
    [/\b(?:true|false|null)\b/y, "tok-literal"],
    [/-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b/y, "tok-number"],
  ],
  hcl: [
    [/(?:#|\/\/).*$/y, "tok-comment"],
    [/\b(?:resource|data|variable|output|provider|module|locals|terraform|required_providers)\b/y, "tok-keyword"],
    [/"(?:[^"\\]|\\.)*"/y, "tok-string"],
    [/\b(?:true|false|null)\b/y, "tok-literal"],
    [/-?\b\d+(?:\.\d+)?\b/y, "tok-number"],
    [/[A-Za-z_][A-Za-z0-9_-]*(?=\s*=)/y, "tok-key"],
  ],
};

/** The language of a file name / media type: "yaml", "json", "hcl" or "text". */
export function languageOf(name = "", mediaType = "") {
  const n = String(name).toLowerCase();
  if (/\.(ya?ml)$/.test(n) || /yaml/.test(mediaType)) return "yaml";
  if (/\.json$/.test(n) || /json/.test(mediaType)) return "json";
  if (/\.(tf|hcl)$/.test(n) || /hcl|terraform/.test(mediaType)) return "hcl";
  return "text";
}

function highlightLine(line, rules) {
  const out = [];
  let plain = "";
  let i = 0;
  while (i < line.length) {
    let matched = false;
    for (const [regex, cls] of rules) {
      regex.lastIndex = i;
      const m = regex.exec(line);
      if (m && m[0].length > 0) {
        if (plain) { out.push(plain); plain = ""; }
        out.push(el("span", { class: cls }, m[0]));
        i += m[0].length;
        matched = true;
        break;
      }
    }
    if (!matched) { plain += line[i]; i += 1; }
  }
  if (plain) out.push(plain);
  return out;
}

/** A <pre><code> of ``text`` with token spans (text nodes only). */
export function highlight(text, language) {
  const rules = RULES[language];
  const code = el("code", { class: `lang-${language}` });
  const lines = String(text).split("\n");
  lines.forEach((line, index) => {
    if (rules) code.append(...highlightLine(line, rules).map((t) => (typeof t === "string" ? document.createTextNode(t) : t)));
    else code.append(document.createTextNode(line));
    if (index < lines.length - 1) code.append(document.createTextNode("\n"));
  });
  return el("pre", { class: "code" }, code);
}
