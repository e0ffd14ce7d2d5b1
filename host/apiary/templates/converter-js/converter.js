// {{name}}: an apiary converter written in JavaScript.
//
// It claims `buzz-pack -> persona-cards`: every persona of a pack (`agents/*.persona.md`) becomes
// a one-page card `cards/<name>.md` (title, description, model, prompt), plus an `index.md`.
// Frontmatter keys a card has no place for (`triggers`, `subscribe`, ...) are reported as lost; a
// persona without a `display_name` gets its `name` as title, reported as synthesised.
//
// Build: npm install && npm run build      (componentize-js; see README.md)
// Check: apiary component inspect {{name}}.wasm
// Use:   apiary component add {{name}}.wasm && apiary convert ./my-pack --to persona-cards --out ./cards

import { log } from "apiary:plugin/host@0.1.0";
import { dir, files, readText, writeText } from "./apiary-fs.js";

const SOURCE = "buzz-pack";
const TARGET = "persona-cards";
/// The frontmatter keys a card shows.
const SHOWN = ["name", "display_name", "description", "model"];

function personas(input) {
  return files(input).filter((f) => /^agents\/[^/]+\.persona\.md$/.test(f));
}

/// `{ fields, body }` of a persona file: the top-level `key: value` lines of its frontmatter
/// (a key with an indented block under it has the value `null`).
function parse(text) {
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!m) return { fields: {}, body: text };
  const fields = {};
  for (const line of m[1].split(/\r?\n/)) {
    const kv = /^([A-Za-z_][\w-]*):\s*(.*)$/.exec(line);
    if (!kv) continue;
    let value = kv[2].trim();
    if (value.startsWith('"')) {
      try {
        value = JSON.parse(value);
      } catch {}
    } else if (value.startsWith("'") && value.endsWith("'")) {
      value = value.slice(1, -1);
    }
    fields[kv[1]] = value === "" ? null : value;
  }
  return { fields, body: m[2].trim() };
}

export const formatConverter = {
  info() {
    return {
      name: "{{name}}",
      version: "0.1.0",
      conversions: [{ source: SOURCE, target: TARGET }],
    };
  },

  detect() {
    const n = personas(dir("/input")).length;
    return [{ format: SOURCE, confidence: n ? 0.5 : 0.0, evidence: `${n} persona file(s) in agents/` }];
  },

  convert(request) {
    if (request.source !== SOURCE || request.target !== TARGET) {
      // A thrown string is the conversion's error; apiary shows it and discards the output.
      throw `{{name}} converts ${SOURCE} to ${TARGET}, not ${request.source} to ${request.target}`;
    }
    const input = dir("/input");
    const output = dir("/output");
    const report = { lost: [], synthesised: [], normalised: [], reinterpreted: [] };
    const index = [];
    for (const path of personas(input)) {
      const { fields, body } = parse(readText(input, path));
      const name = fields.name ?? path.split("/").pop().replace(/\.persona\.md$/, "");
      let title = fields.display_name;
      if (!title) {
        title = name;
        report.synthesised.push({ code: "title-from-name", path, field: "display_name", message: "no display_name; the card is titled with the name" });
      }
      for (const key of Object.keys(fields)) {
        if (!SHOWN.includes(key)) {
          report.lost.push({ code: "not-on-a-card", path, field: key, message: `a card has no place for \`${key}\`` });
        }
      }
      const lines = [`# ${title}`, ""];
      if (fields.description) lines.push(fields.description, "");
      if (fields.model) lines.push(`Model: ${fields.model}`, "");
      lines.push("## Prompt", "", body, "");
      writeText(output, `cards/${name}.md`, lines.join("\n"));
      index.push(`- [${title}](cards/${name}.md)`);
    }
    writeText(output, "index.md", ["# Personas", "", ...index, ""].join("\n"));
    log("info", `{{name}} wrote ${index.length} card(s)`);
    return report;
  },
};
