//! Writes `$OUT_DIR/generate_world.rs`: the `__generate_world!` macro, which runs wit-bindgen in
//! the component's own crate with the frozen WIT inlined. Bindings must be generated there, not
//! here: a component's type (the custom section wit-bindgen emits) must describe exactly the one
//! world it exports, and the crate calling `generate!` is where that section lands.

use std::path::Path;

/// The WIT release this SDK binds to.
const WIT: &str = "wit/apiary-plugin@0.2.0";
const PACKAGE: &str = "package apiary:plugin@0.2.0;";

fn main() {
    println!("cargo:rerun-if-changed={WIT}");
    let mut names: Vec<_> = std::fs::read_dir(WIT)
        .unwrap_or_else(|e| panic!("cannot read {WIT}: {e}"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wit"))
        .collect();
    names.sort();
    // One document: the package line once, then every file without its own package line.
    let mut wit = format!("{PACKAGE}\n");
    for path in &names {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        for line in text.lines().filter(|l| l.trim() != PACKAGE) {
            wit.push_str(line);
            wit.push('\n');
        }
    }
    let mut arms = String::new();
    for world in ["hook", "trigger", "converter"] {
        arms.push_str(&format!(
            "    ({world}) => {{\n        $crate::__private::wit_bindgen::generate!({{\n            inline: {wit:?},\n            world: \"{world}\",\n            runtime_path: \"apiary_guest_sdk::__private::wit_bindgen::rt\",\n        }});\n    }};\n"
        ));
    }
    let source = format!(
        "/// Generates the bindings of one world of the frozen WIT (used by the export macros).\n#[doc(hidden)]\n#[macro_export]\nmacro_rules! __generate_world {{\n{arms}}}\n"
    );
    let out = Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("generate_world.rs");
    std::fs::write(&out, source).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
