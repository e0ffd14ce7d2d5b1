//! `apiary component inspect`, `apiary hook run`, `apiary trigger test`: the sandbox from the
//! command line.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::exit;
use super::output::{Document, ErrorJson, Failed, Human, Outcome, render};
use crate::diag::Report;
use crate::dispatch::HookError;
use crate::dispatch::sandboxed::{self, HookOutput, SandboxHooks, Untrusted};
use crate::dist::trust::policy::StoreTrust;
use crate::dist::trust::{PackRef, TrustView};
use crate::pack;
use crate::paths::Data;
use crate::resolve::{self, Overrides, ResolvedPack, ResolvedPersona};
use crate::sandbox::hook::{HookMessage, HookPoint};
use crate::sandbox::trigger::{Decision, Message, Persona, Reason, TriggerRunner};
use crate::sandbox::{Capabilities, Sandbox, SandboxError, bindings, cache};

const COMPONENT_AFTER_HELP: &str = "\
Examples:
  apiary component inspect ./hooks/audit.wasm
  apiary component inspect ./hooks/audit.wasm --json | jq .world

Compiled components are cached in $XDG_CACHE_HOME/apiary/components (else ~/.cache/apiary/components),
keyed by the component's sha256 and the engine's compatibility hash. Precompiled (.cwasm) files are
refused: apiary only loads native code it compiled itself.";

#[derive(Debug, Subcommand)]
pub enum ComponentCommand {
    /// Show a WebAssembly component's world, WIT version, imports, size, and compile and cached-load
    /// times.
    ///
    /// Exit code: 0 for a component apiary can run, 1 for one it refuses (another WIT version, not an
    /// apiary plugin, not a component), with the reason.
    #[command(after_help = COMPONENT_AFTER_HELP)]
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The component file (`.wasm`, as built by `cargo build --target wasm32-wasip2`).
    pub file: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

const HOOK_AFTER_HELP: &str = "\
The hook runs through the live harness's own hook runner, with its deadlines, environment and
containment. A hook path ending in .wasm runs as a sandboxed `hook` component (apiary:plugin@0.2.x, 0.1.x)
with the persona's workspace preopened read-write at /workspace and nothing else: no environment, no
network, 5 s deadline, 64 MiB memory. A component that declares capabilities (a `.caps.toml` beside
it: http hosts, env variables, read-only directories) gets what `apiary trust <pack> --hooks`
recorded for the file's current digest, as under `apiary up`, plus any --grant; a declared
capability granted by neither refuses it, naming it. HTTP waits end at the hook's deadline.
Any other hook is a script: it runs on the host, unsandboxed,
so it only runs when you pass --trust-hooks (then as the spec says: cwd = workspace, the agent's
environment, message on stdin; killed after 5 s for on_message, 300 s for on_start and on_stop).

The persona's workspace ($AGENT_CWD) is <workspace-root>/<pack-id>/<persona>/, created if missing
(mode 0700); a symbolic link in place of either directory is refused, never followed.
The workspace root is the one `apiary up` uses: --workspace-root, else $APIARY_WORKSPACE_ROOT, else
<data dir>/workspaces (data dir: $APIARY_DATA_DIR, else ~/.local/share/apiary).

Exit codes: 0 the hook succeeded (or the persona has no such hook), 1 the hook failed or was refused
(the message says why: its error, deadline, memory cap, trap, untrusted script), 64 bad arguments.

Examples:
  apiary hook run ./my-pack pip on_start
  apiary hook run ./my-pack pip on_message --message 'deploy to staging' --channel general
  apiary hook run ./my-pack pip on_message --message hi --workspace-root /tmp/ws --json
  apiary hook run ./my-pack pip on_message --message hi --grant http:hooks.example.com";

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Run one of a persona's hooks (on_start, on_stop, on_message) once, as the harness would.
    #[command(after_help = HOOK_AFTER_HELP)]
    Run(HookRunArgs),
}

#[derive(Debug, Args)]
pub struct HookRunArgs {
    /// The pack directory.
    pub pack: PathBuf,
    /// The persona whose hook runs (pack hooks apply unless the persona overrides them).
    pub persona: String,
    /// The hook point: on_start, on_stop or on_message.
    #[arg(value_parser = parse_point)]
    pub point: HookPoint,
    /// The message text for on_message.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The message's channel (on_message).
    #[arg(long, default_value = "general")]
    pub channel: String,
    /// The message's author (on_message).
    #[arg(long, default_value = "operator")]
    pub author: String,
    /// The thread root id, when the message is a thread reply (on_message).
    #[arg(long)]
    pub thread: Option<String>,
    /// Root of the persona workspaces (default: <data dir>/workspaces, as for `apiary up`).
    #[arg(long, value_name = "DIR", env = crate::paths::WORKSPACE_ROOT_ENV)]
    pub workspace_root: Option<PathBuf>,
    /// Run a script (non-.wasm) hook on the host, unsandboxed. Without it script hooks are refused.
    #[arg(long)]
    pub trust_hooks: bool,
    /// Grant a component hook a capability it declares, for this run, beyond what `apiary trust
    /// --hooks` recorded: http:HOST[:PORT], env:NAME or read:DIR. Repeatable.
    #[arg(long = "grant", value_name = "CAPABILITY")]
    pub grants: Vec<String>,
    /// The install root whose trust store holds the recorded grants (default: $BUZZ_PACKS_DIR,
    /// else ~/.buzz/packs, as for `apiary up`).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_point(s: &str) -> Result<HookPoint, String> {
    s.parse::<HookPoint>().map_err(|e| e.to_string())
}

const TRIGGER_AFTER_HELP: &str = "\
The message is JSON: {\"text\": \"...\", \"channel\": \"general\", \"author\": \"bob\", \"mentions\": [\"pip\"], \"id\": \"...\"};
only `text` is required. `mentions` lists persona names the message mentions (the relay's p tags);
`@name` in the text counts as a mention too.

The decision follows the spec (section 10): a mention wakes the persona when triggers.mentions is on,
in any channel; in a subscribed channel, triggers.all_messages wakes it, else a keyword contained in
the text (case-insensitive) does. It is made by the built-in trigger-default component, or by the
component given with --matcher.

Exit codes: 0 decided (whether or not anyone wakes), 1 the pack is invalid or the matcher failed,
64 bad arguments.

Examples:
  apiary trigger test ./my-pack --message '{\"text\": \"@pip can you look?\", \"channel\": \"general\"}'
  apiary trigger test ./my-pack --message '{\"text\": \"CVE in prod\", \"channel\": \"security\"}' --json";

#[derive(Debug, Subcommand)]
pub enum TriggerCommand {
    /// Show which personas of a pack a message would wake, and why.
    #[command(after_help = TRIGGER_AFTER_HELP)]
    Test(TriggerTestArgs),
}

#[derive(Debug, Args)]
pub struct TriggerTestArgs {
    /// The pack directory.
    pub pack: PathBuf,
    /// The message, as JSON (see below).
    #[arg(long, value_name = "JSON")]
    pub message: String,
    /// A trigger component to decide with instead of the built-in trigger-default.
    #[arg(long, value_name = "FILE.wasm")]
    pub matcher: Option<PathBuf>,
    /// Print the decisions as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run_component(cmd: ComponentCommand) -> u8 {
    match cmd {
        ComponentCommand::Inspect(args) => render(&inspect(&args), args.json),
    }
}

pub fn run_hook(cmd: HookCommand) -> u8 {
    match cmd {
        HookCommand::Run(args) => render(&hook_run(&args), args.json),
    }
}

pub fn run_trigger(cmd: TriggerCommand) -> u8 {
    match cmd {
        TriggerCommand::Test(args) => render(&trigger_test(&args), args.json),
    }
}

fn sandbox_or_fail() -> Result<&'static Sandbox, Failed> {
    crate::shared_sandbox().map_err(Failed::error)
}

/// The largest component file read (the live harness caps hooks the same).
const MAX_COMPONENT_FILE: u64 = 64 * 1024 * 1024;

pub(super) fn read_component(path: &Path) -> Result<(String, Vec<u8>), Failed> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    // Not blocking on a FIFO, not reading a device without end.
    crate::safe_fs::read_regular(path, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT_FILE)
        .map(|bytes| (name, bytes))
        .map_err(|e| Failed::error(format_args!("cannot read {}: {e}", path.display())))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A sandbox refusal in the one error shape, the sandbox's kind of refusal as its code.
fn error_json(e: &SandboxError) -> ErrorJson {
    ErrorJson::new(e.kind(), e.to_string())
}

/// A component the sandbox refused: `error: ..`, or `{"ok": false, "error": {code, message}}` with
/// the sandbox's kind of refusal as the code.
fn refused(e: &SandboxError) -> Failed {
    Failed::error(e).with_code(e.kind())
}

/// `component inspect`: what the component is, what it imports and exports, what compiling and
/// loading it from the cache cost, and whether apiary can run it.
pub(super) struct Inspected {
    file: PathBuf,
    sha256: String,
    size: usize,
    imports: Vec<String>,
    exports: Vec<String>,
    compile: Duration,
    cached_load: Option<Duration>,
    cache_dir: Option<PathBuf>,
    /// The world and version it targets, when apiary can run it.
    verdict: Result<bindings::Identity, SandboxError>,
    /// What its `<name>.caps.toml` declares beyond the world's defaults, or why it is unreadable.
    declared: Result<Capabilities, String>,
}

fn inspect(args: &InspectArgs) -> Result<Inspected, Failed> {
    let (name, bytes) = read_component(&args.file)?;
    Sandbox::check_bytes(&args.file.display().to_string(), &bytes).map_err(|e| refused(&e))?;
    let sb = sandbox_or_fail()?;
    let engine = sb.engine();
    let digest = cache::sha256_hex(&bytes);
    let (compile, cached_load) = sb
        .cache()
        .measure(engine, &digest, &bytes)
        .map_err(|e| compile_error(&name, e))?;
    let (component, _) = sb
        .cache()
        .load(engine, &digest, &bytes)
        .map_err(|e| compile_error(&name, e))?;
    let ty = component.component_type();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let identity = bindings::identify(engine, &name, &component);
    // A component of a supported version must also link (its imports must be ones apiary offers).
    let verdict = identity.and_then(|id| sb.load(&name, &bytes).map(|_| id));
    Ok(Inspected {
        file: args.file.clone(),
        sha256: digest,
        size: bytes.len(),
        imports,
        exports,
        compile,
        cached_load,
        cache_dir: sb.cache().dir().map(Path::to_path_buf),
        verdict,
        declared: Capabilities::declared_by(&args.file).map_err(|e| e.to_string()),
    })
}

fn compile_error(name: &str, e: impl std::fmt::Display) -> Failed {
    refused(&SandboxError::Compile {
        name: name.to_string(),
        detail: format!("{e:#}"),
    })
}

impl Serialize for Inspected {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            file: &'a Path,
            sha256: &'a str,
            size: usize,
            imports: &'a [String],
            exports: &'a [String],
            compile_ms: f64,
            cached_load_ms: Option<f64>,
            cache_dir: Option<&'a Path>,
            supported: &'static str,
            world: Option<bindings::World>,
            #[serde(skip_serializing_if = "Option::is_none")]
            wit_version: Option<String>,
            /// Declared in the manifest beside the file, to be granted by the operator.
            capabilities: Vec<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            capabilities_error: Option<&'a str>,
            ok: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<ErrorJson>,
        }
        let id = self.verdict.as_ref().ok();
        Json {
            file: &self.file,
            sha256: &self.sha256,
            size: self.size,
            imports: &self.imports,
            exports: &self.exports,
            compile_ms: ms(self.compile),
            cached_load_ms: self.cached_load.map(ms),
            cache_dir: self.cache_dir.as_deref(),
            supported: bindings::SUPPORTED_RANGE,
            world: id.map(|id| id.world),
            wit_version: id.map(|id| id.version.to_string()),
            capabilities: self
                .declared
                .as_ref()
                .map(Capabilities::strings)
                .unwrap_or_default(),
            capabilities_error: self.declared.as_ref().err().map(String::as_str),
            ok: id.is_some() && self.declared.is_ok(),
            error: self.verdict.as_ref().err().map(error_json),
        }
        .serialize(serializer)
    }
}

impl Outcome for Inspected {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let out = &mut *to.out;
        writeln!(out, "component    {}", self.file.display())?;
        writeln!(out, "sha256       {}", self.sha256)?;
        writeln!(out, "size         {} bytes", self.size)?;
        match &self.verdict {
            Ok(id) => writeln!(
                out,
                "world        {} ({}@{})",
                id.world,
                bindings::PACKAGE,
                id.version
            )?,
            Err(_) => writeln!(out, "world        none that apiary can run")?,
        }
        writeln!(out, "exports      {}", list_or_none(&self.exports))?;
        writeln!(out, "imports      {}", list_or_none(&self.imports))?;
        match &self.declared {
            Ok(c) if c.is_empty() => {
                writeln!(out, "capabilities none beyond its world's (no .caps.toml)")?
            }
            Ok(c) => writeln!(out, "capabilities {c} (declared; granted by the operator)")?,
            Err(e) => writeln!(out, "capabilities refused: {e}")?,
        }
        writeln!(out, "compile      {:.1} ms (Cranelift)", ms(self.compile))?;
        match self.cached_load {
            Some(load) => writeln!(
                out,
                "cached load  {:.2} ms from {} ({:.0}x faster than compiling)",
                ms(load),
                self.cache_dir
                    .as_deref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                self.compile.as_secs_f64() / load.as_secs_f64().max(1e-9)
            )?,
            None => writeln!(out, "cached load  n/a (no writable cache directory)")?,
        }
        if let Err(e) = &self.verdict {
            writeln!(to.err, "error: {e}")?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        if self.verdict.is_ok() && self.declared.is_ok() {
            exit::OK
        } else {
            exit::FAILURE
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join("\n             ")
    }
}

/// Loads, validates and resolves a pack (operator overrides included).
fn resolved_pack(dir: &Path) -> Result<ResolvedPack, Failed> {
    let loaded = pack::load(dir);
    let report = loaded.report;
    let Some(pack) = loaded.pack else {
        let line = format!("error: {} is not a valid pack\n", dir.display());
        return Err(Failed::report(&report, line));
    };
    let overrides = match crate::paths::overrides_file(None) {
        Some(path) => {
            let mut o_report = Report::default();
            let o = Overrides::load(&path, &mut o_report);
            if o_report.has_errors() {
                return Err(Failed::report(&o_report, ""));
            }
            o
        }
        None => Overrides::default(),
    };
    Ok(resolve::resolve(&pack, &overrides, &resolve::process_env))
}

fn find_persona<'a>(resolved: &'a ResolvedPack, name: &str) -> Result<&'a ResolvedPersona, Failed> {
    resolved
        .personas
        .iter()
        .find(|p| p.identity.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = resolved
                .personas
                .iter()
                .map(|p| p.identity.name.as_str())
                .collect();
            Failed::error(format_args!(
                "pack {} has no persona `{name}` (it has: {})",
                resolved.pack.id,
                names.join(", ")
            ))
        })
}

/// The identity namespace `up` would give the pack in `dir` (see [`crate::dist::identity`]), without
/// recording anything: a directory whose id belongs to another pack gets a workspace of its own,
/// never that pack's.
fn hook_namespace(data: &Data, dir: &Path, pack_id: &str) -> String {
    use crate::dist::identity::{self, Kind, Request};
    let keys = data.key_store();
    let root = crate::paths::install_root(None).ok();
    let found = identity::resolve(&Request {
        root: root.as_deref(),
        keys: &keys,
        dir,
        id: pack_id,
        allow_conflict: true,
        claim: false,
    });
    match found {
        Ok(i) => {
            if let Kind::Separate { owner } = &i.kind {
                eprintln!(
                    "note: {} declares the pack id `{pack_id}`, which belongs to {owner}; its hooks run in workspaces of their own ({})",
                    dir.display(),
                    i.namespace
                );
            }
            i.namespace
        }
        // Unknown ownership (an unreadable lock or owner record): never the id's own workspace.
        Err(e) => {
            eprintln!(
                "note: {}; using a workspace bound to {}",
                e.message,
                dir.display()
            );
            let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            identity::separate_namespace(pack_id, &canonical)
        }
    }
}

fn workspace_for(root: &Path, namespace: &str, persona: &str) -> std::io::Result<PathBuf> {
    // As `up` opens it: created without following links a hook or agent may have planted.
    crate::dispatch::workspace::open(root, namespace, persona).map(|ws| ws.path)
}

/// `hook run`: what the hook did, or that the persona has no such hook.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum HookRun {
    Absent(Absent),
    Ran(Box<Ran>),
}

/// Nothing to run; the message says so.
#[derive(Serialize)]
pub(super) struct Absent {
    ok: bool,
    ran: bool,
    message: String,
}

/// A hook that ran (or was refused: a failure).
#[derive(Serialize)]
pub(super) struct Ran {
    ok: bool,
    ran: bool,
    pack: String,
    persona: String,
    point: HookPoint,
    hook: String,
    /// `component` or `script`.
    kind: &'static str,
    workspace: PathBuf,
    #[serde(rename = "elapsed_us", serialize_with = "micros")]
    elapsed: Option<Duration>,
    stdout: String,
    stderr: String,
    error: Option<ErrorJson>,
}

fn micros<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    d.map(|d| d.as_micros() as u64).serialize(s)
}

fn hook_run(args: &HookRunArgs) -> Result<HookRun, Failed> {
    let resolved = resolved_pack(&args.pack)?;
    let persona = find_persona(&resolved, &args.persona)?;
    let pack_id = &resolved.pack.id;
    let Some(hook) = sandboxed::hook_for(persona, args.point).cloned() else {
        let message = format!(
            "persona {} of pack {pack_id} has no {} hook; nothing to run",
            persona.identity.name,
            args.point.as_str()
        );
        return Ok(HookRun::Absent(Absent {
            ok: true,
            ran: false,
            message,
        }));
    };
    let data = Data::locate();
    let root = data.workspace_root(args.workspace_root.as_deref());
    let namespace = hook_namespace(&data, &args.pack, pack_id);
    let workspace = workspace_for(&root, &namespace, &persona.identity.name).map_err(|e| {
        Failed::error(format_args!(
            "cannot create the persona workspace under {}: {e}",
            root.display()
        ))
    })?;
    let (ok, error, stdout, stderr, elapsed) =
        match execute(args, &resolved, persona, &hook, &workspace)? {
            Ok(o) => (true, None, o.stdout, o.stderr, Some(o.elapsed)),
            Err((code, message)) => (
                false,
                Some(ErrorJson::new(code, message)),
                String::new(),
                String::new(),
                None,
            ),
        };
    Ok(HookRun::Ran(Box::new(Ran {
        ok,
        ran: true,
        pack: pack_id.clone(),
        persona: persona.identity.name.clone(),
        point: args.point,
        kind: if sandboxed::is_component(&hook) {
            "component"
        } else {
            "script"
        },
        hook,
        workspace,
        elapsed,
        stdout,
        stderr,
        error,
    })))
}

/// Runs the hook through the live harness's own runner, for this one pack: its deadlines,
/// environment and containment. A hook file outside the pack is refused before anything runs.
fn execute(
    args: &HookRunArgs,
    resolved: &ResolvedPack,
    persona: &ResolvedPersona,
    hook: &str,
    workspace: &Path,
) -> Result<Result<HookOutput, (String, String)>, Failed> {
    let pack_id = &resolved.pack.id;
    Capabilities::parse_all(&args.grants).map_err(Failed::error)?;
    let root = crate::paths::install_root(args.root.as_deref())?;
    let pack = PackRef {
        id: pack_id.clone(),
        version: resolved.pack.version.clone(),
        root: resolved.pack.root.clone(),
    };
    // The grants `apiary trust --hooks` recorded for the file's current digest (as `up` has them)
    // plus `--grant`; script hooks are left to `--trust-hooks` alone.
    let grants = StoreTrust::new(TrustView::load(&root), &[pack], None)
        .granting(args.grants.clone())
        .refusing_scripts(Untrusted {
            why: "scripts run on the host outside the sandbox".into(),
            remedy: "apiary hook run --trust-hooks".into(),
        });
    let roots = HashMap::from([(pack_id.clone(), resolved.pack.root.clone())]);
    let hooks = Arc::new(
        SandboxHooks::new(roots, std::sync::Arc::new(crate::builtin::Components))
            .trust_all_scripts(args.trust_hooks)
            .with_trust(grants),
    );
    hooks
        .hook_file(pack_id, hook)
        .map_err(|e| Failed::error(detail(&e)))?;
    let message = (args.point == HookPoint::OnMessage).then(|| HookMessage {
        id: format!("cli-{}", std::process::id()),
        channel: args.channel.trim_start_matches('#').to_string(),
        thread: args.thread.clone(),
        author: args.author.clone(),
        author_name: None,
        text: args.message.clone().unwrap_or_default(),
    });
    Ok(
        match hooks.run_once(args.point, pack_id, persona, workspace, message) {
            Ok(out) => Ok(out.unwrap_or_default()),
            Err(HookError::Untrusted { .. }) => Err((
                "untrusted-script".to_string(),
                format!(
                    "script hook `{hook}` not run: scripts run on the host outside the sandbox; review it and pass --trust-hooks to run it"
                ),
            )),
            Err(e) => Err((e.kind().to_string(), detail(&e))),
        },
    )
}

/// A hook error's message; a script's without the `script hook` prefix (the output names the hook).
fn detail(e: &HookError) -> String {
    match e {
        HookError::Script { source, .. } => source.to_string(),
        e => e.to_string(),
    }
}

impl Outcome for HookRun {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let r = match self {
            HookRun::Absent(a) => return writeln!(to.out, "{}", a.message),
            HookRun::Ran(r) => r,
        };
        let (point, hook) = (r.point.as_str(), &r.hook);
        let who = format!("{}/{}", r.pack, r.persona);
        match &r.error {
            None => {
                to.out.write_all(r.stdout.as_bytes())?;
                writeln!(
                    to.err,
                    "✓ {point} hook {hook} of {who} succeeded in {:.2} ms (workspace {})",
                    r.elapsed.map(ms).unwrap_or_default(),
                    r.workspace.display()
                )
            }
            Some(e) => writeln!(
                to.err,
                "✗ {point} hook {hook} of {who} failed: {}",
                e.message
            ),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        match self {
            HookRun::Ran(r) if !r.ok => exit::FAILURE,
            _ => exit::OK,
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageArg {
    text: String,
    #[serde(default)]
    channel: String,
    #[serde(default)]
    author: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    mentions: Vec<String>,
}

/// A decision's reason as JSON: `{"kind": "keyword", "keyword": ..}`, `{"kind": "mentioned"}`, ...
#[derive(Serialize)]
struct ReasonJson<'a> {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    keyword: Option<&'a str>,
}

impl<'a> ReasonJson<'a> {
    fn of(reason: &'a Reason) -> ReasonJson<'a> {
        let (kind, keyword) = match reason {
            Reason::Mentioned => ("mentioned", None),
            Reason::Keyword(k) => ("keyword", Some(k.as_str())),
            Reason::AllMessages => ("all_messages", None),
            Reason::NotSubscribed => ("not_subscribed", None),
            Reason::NoMatch => ("no_match", None),
        };
        ReasonJson { kind, keyword }
    }
}

/// `trigger test`: each persona's decision (or the matcher's failure) for the message.
pub(super) struct Decided {
    pack: String,
    matcher: String,
    personas: Vec<(String, Result<Decision, SandboxError>)>,
}

impl Decided {
    fn woken(&self) -> impl Iterator<Item = &str> {
        self.personas
            .iter()
            .filter(|(_, d)| d.as_ref().is_ok_and(|d| d.wake))
            .map(|(n, _)| n.as_str())
    }
}

fn trigger_test(args: &TriggerTestArgs) -> Result<Decided, Failed> {
    let m: MessageArg = serde_json::from_str(&args.message).map_err(|e| {
        Failed::usage(format_args!(
            "--message is not a valid message: {e}\n  expected JSON like {{\"text\": \"hello @pip\", \"channel\": \"general\"}}"
        ))
    })?;
    let resolved = resolved_pack(&args.pack)?;
    let sb = sandbox_or_fail()?;
    let runner = match &args.matcher {
        None => crate::builtin::trigger_matcher(sb),
        Some(path) => {
            let (name, bytes) = read_component(path)?;
            sb.load(&name, &bytes).and_then(TriggerRunner::new)
        }
    };
    let runner = runner.map_err(|e| refused(&e))?;
    let message = Message {
        id: m.id,
        channel: m.channel,
        author: m.author,
        text: m.text,
        mentions: m.mentions,
    };
    let personas = resolved
        .personas
        .iter()
        .map(|p| {
            // As `up` gives the built-in matcher: `pack-id/name`, which answers to `@name` and
            // `@pack-id/name`; a component under test gets the bare name.
            let name = match &args.matcher {
                None => format!("{}/{}", resolved.pack.id, p.identity.name),
                Some(_) => p.identity.name.clone(),
            };
            let persona = Persona {
                name,
                mentions: p.triggers.mentions,
                keywords: p.triggers.keywords.clone(),
                all_messages: p.triggers.all_messages,
                subscribe: p.subscribe.clone(),
            };
            // Failure policy: a matcher failure means "do not wake".
            let decision = runner.decide(sb, &persona, &message).map(|o| o.value);
            (p.identity.name.clone(), decision)
        })
        .collect();
    Ok(Decided {
        pack: resolved.pack.id.clone(),
        matcher: runner.loaded().name.to_string(),
        personas,
    })
}

impl Serialize for Decided {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Row<'a> {
            name: &'a str,
            wake: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<ReasonJson<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            why: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<ErrorJson>,
        }
        #[derive(Serialize)]
        struct Json<'a> {
            pack: &'a str,
            matcher: &'a str,
            woken: Vec<&'a str>,
            personas: Vec<Row<'a>>,
        }
        let personas = self
            .personas
            .iter()
            .map(|(name, d)| match d {
                Ok(d) => Row {
                    name,
                    wake: d.wake,
                    reason: Some(ReasonJson::of(&d.reason)),
                    why: Some(d.reason.to_string()),
                    error: None,
                },
                Err(e) => Row {
                    name,
                    wake: false,
                    reason: None,
                    why: None,
                    error: Some(error_json(e)),
                },
            })
            .collect();
        Json {
            pack: &self.pack,
            matcher: &self.matcher,
            woken: self.woken().collect(),
            personas,
        }
        .serialize(serializer)
    }
}

impl Outcome for Decided {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let rows = &self.personas;
        let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, d) in rows {
            match d {
                Ok(d) if d.wake => writeln!(to.out, "✓ {name:width$}  wakes: {}", d.reason)?,
                Ok(d) => writeln!(to.out, "· {name:width$}  stays asleep: {}", d.reason)?,
                Err(e) => writeln!(
                    to.out,
                    "✗ {name:width$}  stays asleep: the matcher failed: {e}"
                )?,
            }
        }
        writeln!(
            to.err,
            "{} of {} persona{} would wake (matcher: {})",
            self.woken().count(),
            rows.len(),
            if rows.len() == 1 { "" } else { "s" },
            self.matcher
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    fn exit_code(&self) -> u8 {
        if self.personas.iter().any(|(_, d)| d.is_err()) {
            exit::FAILURE
        } else {
            exit::OK
        }
    }
}
