//! End-to-end: what the built-in converters write into a persona pack stays inside the persona
//! pack schema (apiary-schema), so `apiary pack validate` has no unknown-key warning about it.
//! Data a pack has no key for travels in the converter's `x-…` manifest key, the one unknown key
//! the carrying convention allows. convert_corpus checks the same for every corpus item.

use std::path::Path;

use apiary_e2e::{Operator, repo_root, write_tree};
use serde_json::{Value, json};

/// The foreign formats meadow converts to and back from (an agent-compose package needs
/// personality and identity data meadow does not have: the corpus run covers that converter).
const FORMATS: &[&str] = &["agent-plugins", "claude-plugin", "duduclaw-expert"];

/// `apiary pack validate --json` of `dir`, which must be valid.
fn validate(env: &Operator, dir: &Path) -> Value {
    let r = env.run(&["pack", "validate", &dir.display().to_string(), "--json"]);
    let v = r.json();
    assert_eq!(v["valid"], true, "{}: {v:#}", dir.display());
    v
}

/// The unknown-key warnings of a validation (`apiary pack validate --json`, or the `validation`
/// of `apiary convert --json`, whose messages start with the code), except for `x-…` keys
/// (errors fail `validate` anyway).
pub(crate) fn unknown_keys(validation: &Value) -> Vec<String> {
    let mut out = Vec::new();
    // `pack validate` lists its findings in `diagnostics`, `convert` its warnings in `warnings`.
    let warnings = validation["diagnostics"]
        .as_array()
        .or_else(|| validation["warnings"].as_array())
        .unwrap();
    for w in warnings {
        let message = w["message"].as_str().unwrap_or_default();
        let text = match w["code"].as_str() {
            Some(code) => format!("{code}: {message}"),
            None => message.to_string(),
        };
        let unknown = [
            "manifest.unknown-key",
            "manifest.unknown-default",
            "mcp.unknown-key",
        ]
        .iter()
        .any(|c| text.starts_with(&format!("{c}:")));
        let key = text.split('`').nth(1).unwrap_or_default();
        if unknown && !key.starts_with("x-") {
            out.push(text);
        }
    }
    out
}

/// `apiary convert <src> --to <to> --out <out> --json`, which must convert.
fn convert(env: &Operator, src: &Path, to: &str, out: &str) -> (Value, std::path::PathBuf) {
    let out = env.path(out);
    let r = env.run(&[
        "convert",
        &src.display().to_string(),
        "--to",
        to,
        "--out",
        &out.display().to_string(),
        "--json",
    ]);
    assert!(matches!(r.code, 0 | 2), "{}{}", r.stdout, r.stderr);
    (r.json(), out)
}

#[test]
fn an_agent_plugins_cwd_is_carried_not_written_into_the_pack() {
    let env = Operator::new();
    let src = env.path("plugin");
    let plugin = json!({
        "$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json",
        "name": "acme.tools",
        "version": "1.0.0",
        "description": "Runs the Acme tool from its own directory."
    });
    let mcp = json!({
        "$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json",
        "mcpServers": {
            "tool": {"type": "stdio", "command": "acme-tool", "args": ["serve"], "cwd": "./work"}
        }
    });
    write_tree(
        &src,
        &[
            ("plugin.json", &plugin.to_string()),
            ("mcp.json", &mcp.to_string()),
        ],
    );

    let (v, pack) = convert(&env, &src, "buzz-pack", "pack");
    let reinterpreted = v["report"]["reinterpreted"].as_array().unwrap();
    assert!(
        reinterpreted
            .iter()
            .any(|f| f["code"] == "mcp-cwd-ignored" && f["field"] == "mcpServers.tool.cwd"),
        "{v:#}"
    );
    // The validator has nothing to say about the MCP entry.
    let validation = validate(&env, &pack);
    assert_eq!(
        unknown_keys(&validation),
        Vec::<String>::new(),
        "{validation:#}"
    );
    let servers: Value =
        serde_json::from_str(&std::fs::read_to_string(pack.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(
        servers["mcpServers"]["tool"],
        json!({"command": "acme-tool", "args": ["serve"]})
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(pack.join(".plugin/plugin.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["x-agent-plugins"]["mcp_servers"]["tool"]["cwd"],
        "./work"
    );

    // And back: the OPS entry comes back as it was.
    let (_, ops) = convert(&env, &pack, "agent-plugins", "ops");
    let back: Value =
        serde_json::from_str(&std::fs::read_to_string(ops.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(back["mcpServers"], mcp["mcpServers"]);
}

#[test]
fn packs_written_by_every_converter_use_only_schema_keys() {
    let env = Operator::new();
    let meadow = repo_root().join("examples/meadow");
    for (n, format) in FORMATS.iter().enumerate() {
        let (_, foreign) = convert(&env, &meadow, format, &format!("f{n}"));
        let (v, pack) = convert(&env, &foreign, "buzz-pack", &format!("p{n}"));
        assert_eq!(
            unknown_keys(&v["validation"]),
            Vec::<String>::new(),
            "{format} -> buzz-pack: {v:#}"
        );
        let validation = validate(&env, &pack);
        assert_eq!(
            unknown_keys(&validation),
            Vec::<String>::new(),
            "{format} -> buzz-pack: {validation:#}"
        );
    }
}
