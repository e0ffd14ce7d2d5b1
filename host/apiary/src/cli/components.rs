//! `apiary component add | list | remove | inspect`: the operator's third-party converter
//! components (kept under `<data dir>/components/`), plus the existing `inspect`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{exit, print_json, sandbox};
use crate::convert::store::{Entry, Store};

const AFTER_HELP: &str = "\
Added converters live in $APIARY_DATA_DIR/components (else ~/.local/share/apiary/components): the
.wasm copied there and registry.json recording each one's name, sha256 and source. `apiary convert`
uses them exactly like the built-in converters; one whose file no longer matches its recorded
digest is refused. Compiled code goes to the compile cache ($XDG_CACHE_HOME/apiary/components).

Examples:
  apiary component inspect ./my-converter.wasm
  apiary component add ./my-converter.wasm
  apiary component list --json
  apiary component remove my-converter";

#[derive(Debug, Subcommand)]
#[command(after_help = AFTER_HELP)]
pub enum ComponentCommand {
    /// Show a WebAssembly component's world, WIT version, imports, size, and compile and cached-load
    /// times.
    ///
    /// Exit code: 0 for a component apiary can run, 1 for one it refuses (another WIT version, not an
    /// apiary plugin, not a component), with the reason.
    Inspect(sandbox::InspectArgs),
    /// Add a converter component for `apiary convert` (checks its world and WIT version, records
    /// its digest, compiles it into the cache).
    #[command(after_help = AFTER_HELP)]
    Add(AddArgs),
    /// List the added converter components.
    #[command(after_help = AFTER_HELP)]
    List(ListArgs),
    /// Remove an added converter component.
    #[command(after_help = AFTER_HELP)]
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The component file (`.wasm`, a `converter` world component).
    pub file: PathBuf,
    /// The name to add it under (default: the name its `info` gives).
    #[arg(long)]
    pub name: Option<String>,
    /// Replace an added component of the same name.
    #[arg(long)]
    pub force: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the list as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The name it was added under (see `apiary component list`).
    pub name: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ComponentCommand) -> u8 {
    let store = Store::new(&crate::paths::Data::locate().components());
    match cmd {
        ComponentCommand::Inspect(args) => {
            sandbox::run_component(sandbox::ComponentCommand::Inspect(args))
        }
        ComponentCommand::Add(args) => add(&store, &args),
        ComponentCommand::List(args) => list(&store, &args),
        ComponentCommand::Remove(args) => remove(&store, &args),
    }
}

fn failed(message: &str, json: bool) -> u8 {
    if json {
        print_json(&json!({ "ok": false, "error": message }));
    } else {
        eprintln!("error: {message}");
    }
    exit::FAILURE
}

fn entry_json(e: &Entry) -> serde_json::Value {
    json!({
        "name": e.name,
        "version": e.version,
        "digest": e.digest,
        "source": e.source,
        "world": e.world,
        "wit_version": e.wit_version,
        "size": e.size,
        "conversions": e.conversions.iter().map(|(s, t)| json!({"source": s, "target": t})).collect::<Vec<_>>(),
    })
}

fn pairs(e: &Entry) -> String {
    e.conversions
        .iter()
        .map(|(s, t)| format!("{s} -> {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn add(store: &Store, args: &AddArgs) -> u8 {
    let sb = match crate::shared_sandbox() {
        Ok(sb) => sb,
        Err(e) => return failed(&e.to_string(), args.json),
    };
    match store.add(sb, &args.file, args.name.as_deref(), args.force) {
        Ok(e) => {
            if args.json {
                print_json(&json!({ "ok": true, "component": entry_json(&e) }));
            } else {
                println!(
                    "✓ added {} {} ({}; sha256 {})",
                    e.name,
                    e.version,
                    pairs(&e),
                    &e.digest[..12]
                );
            }
            exit::OK
        }
        Err(m) => failed(&m.to_string(), args.json),
    }
}

fn list(store: &Store, args: &ListArgs) -> u8 {
    let entries = match store.list() {
        Ok(e) => e,
        Err(m) => return failed(&m.to_string(), args.json),
    };
    // The digest check `apiary convert` makes, so a tampered file shows here too.
    let status: Vec<Result<(), String>> = entries
        .iter()
        .map(|e| store.bytes(e).map(|_| ()).map_err(|e| e.to_string()))
        .collect();
    if args.json {
        let rows: Vec<_> = entries
            .iter()
            .zip(&status)
            .map(|(e, s)| {
                let mut v = entry_json(e);
                v["ok"] = json!(s.is_ok());
                if let Err(m) = s {
                    v["error"] = json!(m);
                }
                v
            })
            .collect();
        print_json(&json!({ "dir": store.dir(), "components": rows }));
        return exit::OK;
    }
    if entries.is_empty() {
        println!("no components added (apiary component add FILE.wasm)");
    }
    for (e, s) in entries.iter().zip(&status) {
        println!("{} {}  {}", e.name, e.version, pairs(e));
        println!("    sha256 {}  from {}", e.digest, e.source.display());
        if let Err(m) = s {
            println!("    ✗ refused: {m}");
        }
    }
    exit::OK
}

fn remove(store: &Store, args: &RemoveArgs) -> u8 {
    match store.remove(&args.name) {
        Ok(e) => {
            if args.json {
                print_json(&json!({ "ok": true, "removed": entry_json(&e) }));
            } else {
                println!("✓ removed {}", e.name);
            }
            exit::OK
        }
        Err(m) => failed(&m.to_string(), args.json),
    }
}
