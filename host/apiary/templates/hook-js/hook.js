// {{name}}: an apiary hook written in JavaScript.
//
// `on-message` drops a message whose text contains "spam" (the persona never sees it) and keeps
// every other one; each decision is logged through apiary's `host.log`.
//
// Build: npm install && npm run build      (componentize-js; see README.md)
// Check: apiary component inspect {{name}}.wasm
// Use:   name it in a persona's `hooks.on_message` (for example `hooks/{{name}}.wasm`).

import { log } from "apiary:plugin/host@0.1.0";

export const lifecycle = {
  onStart(persona) {
    log("info", `{{name}} started for ${persona.name}`);
  },
  onStop(persona) {},
  onMessage(context) {
    const text = context.message.text;
    if (text.toLowerCase().includes("spam")) {
      log("info", `{{name}} dropped ${context.message.id}`);
      // A thrown string is the hook's error result: apiary drops the message.
      throw "dropped by {{name}}: looks like spam";
    }
  },
};
