"""{{name}}: an apiary hook written in Python.

`on-message` drops a message whose text contains "spam" (the persona never sees it) and keeps
every other one; each decision is logged through apiary's `host.log`.

Build: componentize-py -d <apiary>/wit/apiary-plugin@0.1.0 -w hook componentize app -o {{name}}.wasm
Check: apiary component inspect {{name}}.wasm
Use:   name it in a persona's `hooks.on_message` (for example `hooks/{{name}}.wasm`).
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.lifecycle import MessageContext, Persona
from wit_world.imports import host


class Lifecycle(exports.Lifecycle):
    def on_start(self, persona: Persona) -> None:
        host.log(host.Level.INFO, f"{{name}} started for {persona.name}")

    def on_stop(self, persona: Persona) -> None:
        pass

    def on_message(self, context: MessageContext) -> None:
        if "spam" in context.message.text.lower():
            host.log(host.Level.INFO, f"{{name}} dropped {context.message.id}")
            # The hook's error result: apiary drops the message.
            raise Err("dropped by {{name}}: looks like spam")
