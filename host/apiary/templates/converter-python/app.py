"""{{name}}: an apiary converter written in Python.

It claims `text -> text-lower`: every `*.txt` file in the input tree (read-only at /input) is
written lower-cased to /output, and each one is reported as `normalised`.

Build: componentize-py -d <apiary>/wit/apiary-plugin@0.1.0 -w converter componentize app -o {{name}}.wasm
Check: apiary component inspect {{name}}.wasm
Use:   apiary component add {{name}}.wasm && apiary convert <dir> --to text-lower
"""

import os

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.format_converter import (
    Conversion,
    ConverterInfo,
    Detection,
    Finding,
    Report,
    Request,
)


def txt_files():
    return sorted(n for n in os.listdir("/input") if n.endswith(".txt"))


class FormatConverter(exports.FormatConverter):
    def info(self) -> ConverterInfo:
        return ConverterInfo("{{name}}", "0.1.0", [Conversion("text", "text-lower")])

    def detect(self):
        n = len(txt_files())
        return [Detection("text", 1.0 if n else 0.0, f"{n} .txt file(s) in the input")]

    def convert(self, request: Request) -> Report:
        if (request.source, request.target) != ("text", "text-lower"):
            raise Err(f"unsupported conversion {request.source} -> {request.target}")
        normalised = []
        for name in txt_files():
            with open(f"/input/{name}", encoding="utf-8") as f:
                text = f.read()
            with open(f"/output/{name}", "w", encoding="utf-8") as f:
                f.write(text.lower())
            normalised.append(Finding("case-folded", name, "", "text lower-cased"))
        return Report([], [], normalised, [])
