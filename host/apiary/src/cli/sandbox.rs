//! `apiary component inspect`, `apiary hook run`, `apiary trigger test`: the sandbox from the
//! command line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{exit, print_json, stderr_is_terminal};
use crate::diag::Report;
use crate::dispatch::HookError;
use crate::dispatch::sandboxed::{self, HookOutput, SandboxHooks};
use crate::pack;
use crate::paths::Data;
use crate::resolve::{self, Overrides, ResolvedPack, ResolvedPersona};
use crate::sandbox::hook::{HookMessage, HookPoint};
use crate::sandbox::trigger::{Message, Persona, Reason, TriggerRunner};
use crate::sandbox::{Sandbox, SandboxError, bindings, cache};

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
containment. A hook path ending in .wasm runs as a sandboxed `hook` component (apiary:plugin@0.1.x)
with the persona's workspace preopened read-write at /workspace and nothing else: no environment, no
network, 5 s deadline, 64 MiB memory. Any other hook is a script: it runs on the host, unsandboxed,
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
  apiary hook run ./my-pack pip on_message --message hi --workspace-root /tmp/ws --json";

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
        ComponentCommand::Inspect(args) => inspect(&args),
    }
}

pub fn run_hook(cmd: HookCommand) -> u8 {
    match cmd {
        HookCommand::Run(args) => hook_run(&args),
    }
}

pub fn run_trigger(cmd: TriggerCommand) -> u8 {
    match cmd {
        TriggerCommand::Test(args) => trigger_test(&args),
    }
}

fn sandbox_or_fail() -> Result<&'static Sandbox, u8> {
    crate::shared_sandbox().map_err(|e| {
        eprintln!("error: {e}");
        exit::FAILURE
    })
}

/// The largest component file read (the live harness caps hooks the same).
const MAX_COMPONENT_FILE: u64 = 64 * 1024 * 1024;

fn read_component(path: &Path) -> Result<(String, Vec<u8>), u8> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    // Not blocking on a FIFO, not reading a device without end.
    match crate::safe_fs::read_regular(path, crate::safe_fs::FinalLink::Follow, MAX_COMPONENT_FILE)
    {
        Ok(bytes) => Ok((name, bytes)),
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", path.display());
            Err(exit::FAILURE)
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn inspect(args: &InspectArgs) -> u8 {
    let (name, bytes) = match read_component(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Err(e) = Sandbox::check_bytes(&args.file.display().to_string(), &bytes) {
        return report_error(&e, args.json);
    }
    let sb = match sandbox_or_fail() {
        Ok(sb) => sb,
        Err(code) => return code,
    };
    let engine = sb.engine();
    let digest = cache::sha256_hex(&bytes);
    let (compile, cached_load) = match sb.cache().measure(engine, &digest, &bytes) {
        Ok(x) => x,
        Err(e) => {
            return report_error(
                &SandboxError::Compile {
                    name,
                    detail: format!("{e:#}"),
                },
                args.json,
            );
        }
    };
    let component = match sb.cache().load(engine, &digest, &bytes) {
        Ok((c, _)) => c,
        Err(e) => {
            return report_error(
                &SandboxError::Compile {
                    name,
                    detail: format!("{e:#}"),
                },
                args.json,
            );
        }
    };
    let ty = component.component_type();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let identity = bindings::identify(engine, &name, &component);
    // A component of a supported version must also link (its imports must be ones apiary offers).
    let verdict = identity.and_then(|id| sb.load(&name, &bytes).map(|_| id));
    if args.json {
        let mut v = json!({
            "file": args.file,
            "sha256": digest,
            "size": bytes.len(),
            "imports": imports,
            "exports": exports,
            "compile_ms": ms(compile),
            "cached_load_ms": cached_load.map(ms),
            "cache_dir": sb.cache().dir(),
            "supported": bindings::SUPPORTED_RANGE,
        });
        match &verdict {
            Ok(id) => {
                v["world"] = json!(id.world);
                v["wit_version"] = json!(id.version.to_string());
                v["ok"] = json!(true);
            }
            Err(e) => {
                v["world"] = json!(null);
                v["ok"] = json!(false);
                v["error"] = json!({ "kind": e.kind(), "message": e.to_string() });
            }
        }
        print_json(&v);
    } else {
        println!("component    {}", args.file.display());
        println!("sha256       {digest}");
        println!("size         {} bytes", bytes.len());
        match &verdict {
            Ok(id) => println!(
                "world        {} ({}@{})",
                id.world,
                bindings::PACKAGE,
                id.version
            ),
            Err(_) => println!("world        none that apiary can run"),
        }
        println!("exports      {}", list_or_none(&exports));
        println!("imports      {}", list_or_none(&imports));
        println!("compile      {:.1} ms (Cranelift)", ms(compile));
        match cached_load {
            Some(load) => println!(
                "cached load  {:.2} ms from {} ({:.0}x faster than compiling)",
                ms(load),
                sb.cache()
                    .dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                compile.as_secs_f64() / load.as_secs_f64().max(1e-9)
            ),
            None => println!("cached load  n/a (no writable cache directory)"),
        }
        if let Err(e) = &verdict {
            eprintln!("error: {e}");
        }
    }
    if verdict.is_ok() {
        exit::OK
    } else {
        exit::FAILURE
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join("\n             ")
    }
}

fn report_error(e: &SandboxError, json: bool) -> u8 {
    if json {
        print_json(
            &json!({ "ok": false, "error": { "kind": e.kind(), "message": e.to_string() } }),
        );
    } else {
        eprintln!("error: {e}");
    }
    exit::FAILURE
}

/// Loads, validates and resolves a pack (operator overrides included); prints problems.
fn resolved_pack(dir: &Path) -> Result<ResolvedPack, u8> {
    let loaded = pack::load(dir);
    let report = loaded.report;
    let Some(pack) = loaded.pack else {
        eprint!("{}", report.render(stderr_is_terminal()));
        eprintln!("error: {} is not a valid pack", dir.display());
        return Err(exit::FAILURE);
    };
    let overrides = match crate::paths::overrides_file(None) {
        Some(path) => {
            let mut o_report = Report::default();
            let o = Overrides::load(&path, &mut o_report);
            if o_report.has_errors() {
                eprint!("{}", o_report.render(stderr_is_terminal()));
                return Err(exit::FAILURE);
            }
            o
        }
        None => Overrides::default(),
    };
    Ok(resolve::resolve(&pack, &overrides, &resolve::process_env))
}

fn find_persona<'a>(resolved: &'a ResolvedPack, name: &str) -> Result<&'a ResolvedPersona, u8> {
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
            eprintln!(
                "error: pack {} has no persona `{name}` (it has: {})",
                resolved.pack.id,
                names.join(", ")
            );
            exit::FAILURE
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

fn hook_run(args: &HookRunArgs) -> u8 {
    let resolved = match resolved_pack(&args.pack) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let persona = match find_persona(&resolved, &args.persona) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let pack_id = &resolved.pack.id;
    let Some(hook) = sandboxed::hook_for(persona, args.point).cloned() else {
        let text = format!(
            "persona {} of pack {pack_id} has no {} hook; nothing to run",
            persona.identity.name,
            args.point.as_str()
        );
        if args.json {
            print_json(&json!({ "ok": true, "ran": false, "message": text }));
        } else {
            println!("{text}");
        }
        return exit::OK;
    };
    let data = Data::locate();
    let root = data.workspace_root(args.workspace_root.as_deref());
    let namespace = hook_namespace(&data, &args.pack, pack_id);
    let workspace = match workspace_for(&root, &namespace, &persona.identity.name) {
        Ok(w) => w,
        Err(e) => {
            eprintln!(
                "error: cannot create the persona workspace under {}: {e}",
                root.display()
            );
            return exit::FAILURE;
        }
    };
    // The harness's own runner, for this one pack: its deadlines, environment and containment.
    let roots = HashMap::from([(pack_id.clone(), resolved.pack.root.clone())]);
    let hooks = Arc::new(SandboxHooks::new(roots).trust_all_scripts(args.trust_hooks));
    // A hook file outside the pack is refused before anything runs.
    if let Err(e) = hooks.hook_file(pack_id, &hook) {
        eprintln!("error: {}", detail(&e));
        return exit::FAILURE;
    }
    let message = (args.point == HookPoint::OnMessage).then(|| HookMessage {
        id: format!("cli-{}", std::process::id()),
        channel: args.channel.trim_start_matches('#').to_string(),
        thread: args.thread.clone(),
        author: args.author.clone(),
        text: args.message.clone().unwrap_or_default(),
    });
    let outcome = match hooks.run_once(args.point, pack_id, persona, &workspace, message) {
        Ok(out) => Ok(out.unwrap_or_default()),
        Err(HookError::Untrusted { .. }) => Err((
            "untrusted-script".to_string(),
            format!(
                "script hook `{hook}` not run: scripts run on the host outside the sandbox; review it and pass --trust-hooks to run it"
            ),
        )),
        Err(e) => Err((e.kind().to_string(), detail(&e))),
    };
    let ran = Ran {
        pack_id,
        persona: &persona.identity.name,
        hook: &hook,
        workspace: &workspace,
    };
    print_outcome(args, &ran, outcome)
}

/// A hook error's message; a script's without the `script hook` prefix (the output names the hook).
fn detail(e: &HookError) -> String {
    match e {
        HookError::Script { source, .. } => source.to_string(),
        e => e.to_string(),
    }
}

/// The hook `hook run` ran.
struct Ran<'a> {
    pack_id: &'a str,
    persona: &'a str,
    hook: &'a str,
    workspace: &'a Path,
}

fn print_outcome(
    args: &HookRunArgs,
    ran: &Ran<'_>,
    outcome: Result<HookOutput, (String, String)>,
) -> u8 {
    let Ran {
        pack_id,
        persona,
        hook,
        workspace,
    } = *ran;
    let (ok, kind, text, stdout, stderr, elapsed) = match outcome {
        Ok(o) => (true, None, None, o.stdout, o.stderr, Some(o.elapsed)),
        Err((kind, text)) => (
            false,
            Some(kind),
            Some(text),
            String::new(),
            String::new(),
            None,
        ),
    };
    if args.json {
        print_json(&json!({
            "ok": ok,
            "ran": true,
            "pack": pack_id,
            "persona": persona,
            "point": args.point,
            "hook": hook,
            "kind": if sandboxed::is_component(hook) { "component" } else { "script" },
            "workspace": workspace,
            "elapsed_us": elapsed.map(|d| d.as_micros() as u64),
            "stdout": stdout,
            "stderr": stderr,
            "error": kind.map(|k| json!({ "kind": k, "message": text })),
        }));
    } else if ok {
        if !stdout.is_empty() {
            print!("{stdout}");
        }
        eprintln!(
            "✓ {} hook {hook} of {pack_id}/{persona} succeeded in {:.2} ms (workspace {})",
            args.point.as_str(),
            elapsed.map(ms).unwrap_or_default(),
            workspace.display()
        );
    } else {
        eprintln!(
            "✗ {} hook {hook} of {pack_id}/{persona} failed: {}",
            args.point.as_str(),
            text.unwrap_or_default()
        );
    }
    if ok { exit::OK } else { exit::FAILURE }
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

fn reason_json(reason: &Reason) -> serde_json::Value {
    match reason {
        Reason::Mentioned => json!({ "kind": "mentioned" }),
        Reason::Keyword(k) => json!({ "kind": "keyword", "keyword": k }),
        Reason::AllMessages => json!({ "kind": "all_messages" }),
        Reason::NotSubscribed => json!({ "kind": "not_subscribed" }),
        Reason::NoMatch => json!({ "kind": "no_match" }),
    }
}

fn trigger_test(args: &TriggerTestArgs) -> u8 {
    let m: MessageArg = match serde_json::from_str(&args.message) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "error: --message is not a valid message: {e}\n  expected JSON like {{\"text\": \"hello @pip\", \"channel\": \"general\"}}"
            );
            return exit::USAGE;
        }
    };
    let resolved = match resolved_pack(&args.pack) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let sb = match sandbox_or_fail() {
        Ok(sb) => sb,
        Err(code) => return code,
    };
    let runner = match &args.matcher {
        None => crate::builtin::trigger_matcher(sb),
        Some(path) => match read_component(path) {
            Ok((name, bytes)) => sb.load(&name, &bytes).and_then(TriggerRunner::new),
            Err(code) => return code,
        },
    };
    let runner = match runner {
        Ok(r) => r,
        Err(e) => return report_error(&e, args.json),
    };
    let message = Message {
        id: m.id,
        channel: m.channel,
        author: m.author,
        text: m.text,
        mentions: m.mentions,
    };
    let mut rows = Vec::new();
    let mut failed = false;
    for p in &resolved.personas {
        let persona = Persona {
            name: p.identity.name.clone(),
            mentions: p.triggers.mentions,
            keywords: p.triggers.keywords.clone(),
            all_messages: p.triggers.all_messages,
            subscribe: p.subscribe.clone(),
        };
        // Failure policy: a matcher failure means "do not wake".
        let decision = runner.decide(sb, &persona, &message).map(|o| o.value);
        failed |= decision.is_err();
        rows.push((p.identity.name.clone(), decision));
    }
    if args.json {
        let personas: Vec<_> = rows
            .iter()
            .map(|(name, d)| match d {
                Ok(d) => json!({ "name": name, "wake": d.wake, "reason": reason_json(&d.reason), "why": d.reason.to_string() }),
                Err(e) => json!({ "name": name, "wake": false, "error": { "kind": e.kind(), "message": e.to_string() } }),
            })
            .collect();
        print_json(&json!({
            "pack": resolved.pack.id,
            "matcher": &*runner.loaded().name,
            "woken": rows.iter().filter(|(_, d)| d.as_ref().is_ok_and(|d| d.wake)).map(|(n, _)| n).collect::<Vec<_>>(),
            "personas": personas,
        }));
    } else {
        let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, d) in &rows {
            match d {
                Ok(d) if d.wake => println!("✓ {name:width$}  wakes: {}", d.reason),
                Ok(d) => println!("· {name:width$}  stays asleep: {}", d.reason),
                Err(e) => println!("✗ {name:width$}  stays asleep: the matcher failed: {e}"),
            }
        }
        let woken = rows
            .iter()
            .filter(|(_, d)| d.as_ref().is_ok_and(|d| d.wake))
            .count();
        eprintln!(
            "{woken} of {} persona{} would wake (matcher: {})",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" },
            runner.loaded().name
        );
    }
    if failed { exit::FAILURE } else { exit::OK }
}
