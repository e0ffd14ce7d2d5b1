//! `apiary component add | list | remove | inspect`: the operator's third-party converter
//! components (kept under `<data dir>/components/`), plus the existing `inspect`, and the author's
//! `new` (component_new.rs) and `test` (component_test.rs).

use std::io;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::{Document, Failed, Human, Outcome, render};
use super::{component_new, component_test, sandbox};
use crate::convert::store::{Entry, Store};

const AFTER_HELP: &str = "\
Added converters live in $APIARY_DATA_DIR/components (else ~/.local/share/apiary/components): the
.wasm copied there and registry.json recording each one's name, sha256 and source. `apiary convert`
uses them exactly like the built-in converters; one whose file no longer matches its recorded
digest is refused. Compiled code goes to the compile cache ($XDG_CACHE_HOME/apiary/components).

Examples:
  apiary component inspect ./my-converter.wasm
  apiary component add ./my-converter.wasm
  apiary component add ./notify.wasm --grant http:hooks.example.com --grant env:HOOK_TOKEN
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
    /// Write a new component project (hook, trigger or converter) from a template that builds
    /// with one command and passes `component inspect` and `component test`.
    #[command(after_help = NEW_AFTER_HELP)]
    New(component_new::NewArgs),
    /// Run a component against fixtures (expected output tree and report, keep/drop, wake/skip),
    /// without a relay; shows each difference.
    #[command(after_help = component_test::AFTER_HELP)]
    Test(component_test::TestArgs),
}

const NEW_AFTER_HELP: &str = "\
Examples:
  apiary component new converter ./my-converter
  apiary component new hook ./no-spam --lang rust
  cd my-converter && cargo build --release --target wasm32-wasip2
  apiary component test target/wasm32-wasip2/release/my_converter.wasm

The Rust templates use the apiary-guest-sdk crate (traits and export macros over the frozen WIT).
A guide from here to `apiary convert` and `apiary up`: docs/writing-a-component.md.";

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
    /// Grant a capability the component declares in its `<name>.caps.toml` beside the file:
    /// `http:HOST[:PORT]` (outbound HTTP to that host), `env:NAME` (that environment variable),
    /// `read:/DIR` (that directory, read-only). Repeat for each; a declared capability left
    /// ungranted refuses the add, naming it. Recorded with the component's digest.
    #[arg(long = "grant", value_name = "CAPABILITY")]
    pub grants: Vec<String>,
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
        ComponentCommand::Add(args) => render(&add(&store, &args), args.json),
        ComponentCommand::List(args) => render(&list(&store, &args), args.json),
        ComponentCommand::Remove(args) => render(&remove(&store, &args), args.json),
        ComponentCommand::New(args) => render(&component_new::new(&args), args.json),
        ComponentCommand::Test(args) => render(&component_test::test(&args), args.json),
    }
}

/// A refusal of the component store: `error: <message>`, or the one error shape with the store's
/// kind of refusal as the code.
fn refused(error: crate::convert::store::StoreError) -> Failed {
    Failed::error(&error).with_code(error.kind())
}

/// An added component, as `--json` shows it.
#[derive(Serialize)]
struct EntryJson<'a> {
    name: &'a str,
    version: &'a str,
    digest: &'a str,
    source: &'a Path,
    world: &'a str,
    wit_version: &'a str,
    size: u64,
    #[serde(serialize_with = "conversions_json")]
    conversions: &'a [(String, String)],
    grants: &'a [String],
}

impl<'a> From<&'a Entry> for EntryJson<'a> {
    fn from(e: &'a Entry) -> Self {
        EntryJson {
            name: &e.name,
            version: &e.version,
            digest: &e.digest,
            source: &e.source,
            world: &e.world,
            wit_version: &e.wit_version,
            size: e.size,
            conversions: &e.conversions,
            grants: &e.grants,
        }
    }
}

/// `(source, target)` pairs as `[{"source": .., "target": ..}]`.
pub(super) fn conversions_json<S: serde::Serializer>(
    pairs: &[(String, String)],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Pair<'a> {
        source: &'a str,
        target: &'a str,
    }
    s.collect_seq(pairs.iter().map(|(source, target)| Pair { source, target }))
}

fn pairs(e: &Entry) -> String {
    e.conversions
        .iter()
        .map(|(s, t)| format!("{s} -> {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `component add`: the component added.
pub(super) struct Added(Entry);

fn add(store: &Store, args: &AddArgs) -> Result<Added, Failed> {
    let granted = crate::sandbox::Capabilities::parse_all(&args.grants).map_err(Failed::error)?;
    let sb = crate::shared_sandbox().map_err(Failed::error)?;
    // Progress for the compilation `add` does (seconds to minutes for a 12-18 MB component).
    let show = !args.json;
    let label = args.file.display().to_string();
    let started = crate::pack::source::read_limited(&args.file, super::precompile::MAX_COMPONENT)
        .ok()
        .and_then(|bytes| super::precompile::announce(sb, &label, &bytes, show));
    let entry = store.add(sb, &args.file, (args.name.as_deref(), args.force), &granted);
    super::precompile::finish(started, entry.is_ok(), show);
    Ok(Added(entry.map_err(refused)?))
}

impl Serialize for Added {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            ok: bool,
            component: EntryJson<'a>,
        }
        Json {
            ok: true,
            component: (&self.0).into(),
        }
        .serialize(serializer)
    }
}

impl Outcome for Added {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let e = &self.0;
        writeln!(
            to.out,
            "✓ added {} {} ({}; sha256 {})",
            e.name,
            e.version,
            pairs(e),
            &e.digest[..12]
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `component list`: each added component, with the digest check `apiary convert` makes (so a
/// tampered file shows here too).
pub(super) struct Listed {
    dir: PathBuf,
    entries: Vec<(Entry, Result<(), String>)>,
}

fn list(store: &Store, _args: &ListArgs) -> Result<Listed, Failed> {
    let entries = store.list().map_err(refused)?;
    let entries = entries
        .into_iter()
        .map(|e| {
            let status = store.bytes(&e).map(|_| ()).map_err(|e| e.to_string());
            (e, status)
        })
        .collect();
    Ok(Listed {
        dir: store.dir().to_path_buf(),
        entries,
    })
}

impl Serialize for Listed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Row<'a> {
            #[serde(flatten)]
            entry: EntryJson<'a>,
            ok: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a str>,
        }
        #[derive(Serialize)]
        struct Json<'a> {
            dir: &'a Path,
            components: Vec<Row<'a>>,
        }
        let components = self
            .entries
            .iter()
            .map(|(e, status)| Row {
                entry: e.into(),
                ok: status.is_ok(),
                error: status.as_ref().err().map(String::as_str),
            })
            .collect();
        Json {
            dir: &self.dir,
            components,
        }
        .serialize(serializer)
    }
}

impl Outcome for Listed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.entries.is_empty() {
            writeln!(
                to.out,
                "no components added (apiary component add FILE.wasm)"
            )?;
        }
        for (e, status) in &self.entries {
            writeln!(to.out, "{} {}  {}", e.name, e.version, pairs(e))?;
            writeln!(
                to.out,
                "    sha256 {}  from {}",
                e.digest,
                e.source.display()
            )?;
            if let Err(m) = status {
                writeln!(to.out, "    ✗ refused: {m}")?;
            }
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// `component remove`: the component removed.
pub(super) struct Removed(Entry);

fn remove(store: &Store, args: &RemoveArgs) -> Result<Removed, Failed> {
    store.remove(&args.name).map(Removed).map_err(refused)
}

impl Serialize for Removed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            ok: bool,
            removed: EntryJson<'a>,
        }
        Json {
            ok: true,
            removed: (&self.0).into(),
        }
        .serialize(serializer)
    }
}

impl Outcome for Removed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        writeln!(to.out, "✓ removed {}", self.0.name)
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}
