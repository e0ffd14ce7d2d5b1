//! `apiary pack build`, `install`, `trust`, `list`, `uninstall`, `verify`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{exit, print_json, stderr_is_terminal};
use crate::dist::{self, DistError, install, trust, verify};

const ROOT_HELP: &str = "Install root. Default: $BUZZ_PACKS_DIR, else ~/.buzz/packs";

#[derive(Debug, Args)]
#[command(
    after_help = "The archive is `<pack-name>-<version>.buzzpack`, where <pack-name> is the last \
dot-separated segment of the manifest id (com.example.meadow-team -> meadow-team); beside it goes \
`<archive>.sha256` in sha256sum format. Builds are reproducible: the same files give the same bytes.\n\n\
Skipped: VCS metadata (.git folders and files, .hg, .svn, ...), agent state (.agents/, .goose/, ...), \
build artefacts, pack.lock.\n\
Refused: files that look like secrets (.env, private keys, credentials), symlinks, a folder laid out \
as a git repository.\n\n\
Examples:\n  apiary pack build ./my-pack\n  apiary pack build ./my-pack --output dist/\n  sha256sum -c my-pack-1.2.0.buzzpack.sha256"
)]
pub struct BuildArgs {
    /// The pack directory.
    pub dir: PathBuf,
    /// Archive path, or an existing directory to put `<pack-name>-<version>.buzzpack` in.
    /// Default: the current directory.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Sources:\n  ./my-pack-1.2.0.buzzpack            needs ./my-pack-1.2.0.buzzpack.sha256 beside it (or --sha256)\n  \
./expert-pack/, ./expert-pack.zip   a DuDuClaw expert pack (expert.toml), converted to a persona pack\n  \
https://host/expert-pack.zip        the same over https (<url>.sha256 verified when published)\n  \
https://host/my-pack-1.2.0.buzzpack  fetches <url>.sha256 from the same place (or --sha256)\n  \
http://host/my-pack-1.2.0.buzzpack   only with --sha256: a .sha256 over http proves nothing\n  \
github:owner/repo[@ref]             a branch, tag or commit\n  \
git+https://host/repo.git[#ref]\n  git+file:///path/to/repo[#ref]\n\n\
The checksum is verified before anything is unpacked; the archive is fenced (no paths outside the \
pack, no symlinks or devices, no VCS metadata such as .git/, capped entry count, sizes and \
compression ratio); the pack is validated. An expert pack .zip without a published checksum needs \
--sha256 or your confirmation (--yes, or a prompt at a terminal). Git clones run without your git \
config, hooks or credential helpers, and are stopped after $APIARY_GIT_TIMEOUT_SECS seconds (default \
300) or past $APIARY_GIT_MAX_MIB MiB (default 512); their .git/ is never installed. Credentials in a \
source URL are kept out of messages and pack.lock. \
The install is atomic: an interrupted install leaves the previous version and pack.lock intact. \
Script hooks arrive quarantined: review and enable them with `apiary trust <pack-id>`.\n\n\
A pack id is bound to the source it was installed from (pack.lock's `source`). Installing an id \
that is installed from another source is refused unless --replace is given. The same source is: \
the same file path (symlinks and `..` resolved; a .buzzpack re-built at the same path), the same \
URL, the same git repository whatever the ref (by the URL cloned: github:o/r is \
git+https://github.com/o/r.git), or the recorded source with its version replaced by the new one \
(…/v1.2.0/team-1.2.0.buzzpack -> …/v1.3.0/team-1.3.0.buzzpack).\n\n\
An expert pack (seed 004 §4) is converted by the built-in sandboxed converter first (a reports_to \
cycle refuses it, nothing written); its agents install parents first; each agent.partial.toml is \
merged into <root>/.apiary/agents/<pack-id>/<persona>/agent.toml without replacing keys already set; \
its hooks/ are carried quarantined and never run; uninstall takes back exactly what it added.\n\n\
Examples:\n  apiary install ./meadow-team-1.2.0.buzzpack\n  apiary install github:example/meadow-team@v1.2.0 --json\n  \
apiary install --sha256 <64 hex digits> http://mirror.internal/meadow-team-1.2.0.buzzpack\n  apiary install --locked github:example/meadow-team   (the commit pack.lock pins)\n  \
apiary install --replace github:mirror/meadow-team   (the same id from another source)\n  \
BUZZ_PACKS_DIR=/srv/packs apiary install https://example.com/meadow-team-1.2.0.buzzpack"
)]
pub struct InstallArgs {
    /// What to install (see below).
    pub source: String,
    /// Install exactly what pack.lock pins for this source (the recorded commit of a git source;
    /// for an archive, refuse unless its digest is the recorded sha256).
    #[arg(long)]
    pub locked: bool,
    /// Replace an installed pack of the same id that came from another source. The new pack takes
    /// over its place, persona keys and workspaces; the old one's hook trust is dropped.
    #[arg(long)]
    pub replace: bool,
    /// The archive's SHA-256 (64 hex digits) from a place you trust: the archive must have it, and
    /// no .sha256 file is needed. Required for plain http:// URLs.
    #[arg(long, value_name = "DIGEST", value_parser = parse_sha256)]
    pub sha256: Option<String>,
    /// Install an expert pack .zip that publishes no checksum without asking.
    #[arg(long, short)]
    pub yes: bool,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_sha256(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("expected 64 hex digits (the output of sha256sum)".into())
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "What needs trust is what runs on this host outside the sandbox: script hooks \
(any hook that is not a .wasm component) and stdio MCP servers (a command line the agent starts). \
`trust` lists each with its exact command line and digest and, once confirmed, records trust in the \
operator's store <root>/.apiary/trust.json for this pack's location, the id and version its manifest \
declares, and these exact hook files, command lines and server definitions: an upgrade, a change to \
any of them, or the same pack in another directory is untrusted again. Nothing shipped beside a \
pack (a pack.lock, a .apiary/trust.json) is ever read as trust.\n\n\
PACK is an installed pack's id (its copy in <root>/<pack-id>/), or a pack directory given as a path \
(anything with a `/` or starting with `.`: ./my-pack, /src/my-pack), for packs run with \
`apiary up <dir>`. The store is written only when it, <root>/.apiary/ and <root> belong to you and \
nobody else can write them.\n\n\
MCP `${VAR}`s are separate: a pack reads only the operator variables listed for it in the overrides \
file (`allow_env = [\"GITHUB_TOKEN\"]` in the `[\"<pack-id>\"]` table).\n\n\
Examples:\n  apiary trust com.example.meadow-team\n  apiary trust com.example.meadow-team --hooks --yes\n  \
apiary trust ./my-pack --mcp\n  apiary trust com.example.meadow-team --revoke"
)]
pub struct TrustArgs {
    /// The installed pack's id, or a pack directory as a path (./my-pack).
    #[arg(value_name = "PACK")]
    pub pack_id: String,
    /// Trust the pack's hooks (script hooks and hook components). Without --hooks or --mcp, both.
    #[arg(long)]
    pub hooks: bool,
    /// Trust the pack's stdio MCP servers (the command lines its agents start). Without --hooks or
    /// --mcp, both.
    #[arg(long)]
    pub mcp: bool,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    pub yes: bool,
    /// Withdraw trust instead.
    #[arg(long, conflicts_with = "yes")]
    pub revoke: bool,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout (requires --yes or --revoke to change anything).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  apiary list\n  apiary list --json | jq '.packs[].pack_id'")]
pub struct ListArgs {
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the installed packs as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Removes the pack's pack.lock entry, the files it installed and its trust \
records. Files in the pack directory that the pack did not bring are kept.\n\n\
Examples:\n  apiary uninstall com.example.meadow-team"
)]
pub struct UninstallArgs {
    /// The installed pack's id.
    pub pack_id: String,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit code 0 when every installed pack matches what was installed, 1 when \
anything drifted (a file changed, went missing, appeared or became executable).\n\n\
Examples:\n  apiary verify\n  apiary verify com.example.meadow-team --json"
)]
pub struct VerifyArgs {
    /// Check only this pack.
    pub pack_id: Option<String>,
    #[arg(long, env = crate::paths::INSTALL_ROOT_ENV, value_name = "DIR", help = ROOT_HELP)]
    pub root: Option<PathBuf>,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Prints an error (JSON on stdout with `--json`, else on stderr with the validation report).
fn fail(e: &DistError, json: bool) -> u8 {
    if json {
        print_json(&json!({ "ok": false, "error": e.to_json() }));
    } else {
        if let Some(r) = &e.report {
            eprint!("{}", r.render(stderr_is_terminal()));
        }
        eprintln!("error: {}", e.message);
        if let Some(h) = &e.help {
            eprintln!("  help: {h}");
        }
    }
    exit::FAILURE
}

fn root_of(flag: &Option<PathBuf>, json: bool) -> Result<PathBuf, u8> {
    crate::paths::install_root(flag.as_deref()).map_err(|e| fail(&e, json))
}

pub fn build(args: &BuildArgs) -> u8 {
    match dist::build::build(&args.dir, args.output.as_deref()) {
        Ok((built, report)) => {
            if args.json {
                print_json(&json!({ "ok": true, "build": built, "warnings": report.warnings() }));
            } else {
                if report.warnings() > 0 {
                    eprint!("{}", report.render(stderr_is_terminal()));
                }
                eprintln!(
                    "Built {} {} ({} files, {} bytes)\n  {}\n  {}  sha256 {}",
                    built.pack_id,
                    built.version,
                    built.files,
                    built.bytes,
                    built.archive.display(),
                    built.checksum_file.display(),
                    built.sha256
                );
            }
            exit::OK
        }
        Err(e) => fail(&e, args.json),
    }
}

pub fn install(args: &InstallArgs) -> u8 {
    let root = match root_of(&args.root, args.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let unverified = if args.yes {
        dist::expert::Unverified::Accept
    } else if !args.json && std::io::stdin().is_terminal() {
        dist::expert::Unverified::Ask(ask_yes_no)
    } else {
        dist::expert::Unverified::Refuse
    };
    let opts = install::Options {
        progress: !args.json && stderr_is_terminal(),
        locked: args.locked,
        replace: args.replace,
        sha256: args.sha256.clone(),
        unverified,
        ..Default::default()
    };
    match install::install(&root, &args.source, &opts) {
        Ok(done) => {
            let quarantined = done.hooks.len();
            if args.json {
                print_json(&json!({
                    "ok": true,
                    "pack_id": done.pack_id,
                    "name": done.name,
                    "version": done.version,
                    "previous_version": done.previous_version,
                    "replaced_source": done.replaced_source,
                    "dir": done.dir,
                    "lock": done.lock_entry,
                    "files": done.files,
                    "hooks": done.hooks,
                    "expert": done.expert,
                    "warnings": done.report.warnings(),
                }));
            } else {
                if done.report.warnings() > 0 {
                    eprint!("{}", done.report.render(stderr_is_terminal()));
                }
                let how = match &done.previous_version {
                    Some(v) if v == &done.version => format!(" (reinstalled over {v})"),
                    Some(v) => format!(" (was {v})"),
                    None => String::new(),
                };
                eprintln!(
                    "Installed {} {}{how} into {}",
                    done.pack_id,
                    done.version,
                    done.dir.display()
                );
                if let Some(old) = &done.replaced_source {
                    eprintln!("  replaced the pack installed from {old}");
                }
                if let Some(s) = &done.lock_entry.sha256 {
                    eprintln!("  sha256   {s}");
                }
                if let Some(r) = &done.lock_entry.resolved {
                    eprintln!("  resolved {r}");
                }
                if let Some(x) = &done.expert {
                    print_expert(x);
                }
                if quarantined > 0 {
                    eprintln!(
                        "  {quarantined} hook file{} quarantined (not executable, untrusted): review with `apiary trust {}`",
                        if quarantined == 1 { "" } else { "s" },
                        done.pack_id
                    );
                }
            }
            exit::OK
        }
        Err(e) => fail(&e, args.json),
    }
}

/// Asks `question` on the terminal; only `y`/`yes` is a yes.
fn ask_yes_no(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What installing an expert pack did, for people.
fn print_expert(x: &dist::expert::Summary) {
    let short = |d: &str| d.chars().take(12).collect::<String>();
    eprintln!(
        "  converted from the DuDuClaw expert pack {} by {} {} (sha256 {}…); checksum: {}",
        x.expert_name,
        x.converter,
        x.converter_version,
        short(&x.converter_digest),
        x.checksum
    );
    let order: Vec<String> = x
        .agents
        .iter()
        .map(|a| {
            if a.reports_to.is_empty() {
                a.persona.clone()
            } else {
                format!("{} (reports to {})", a.persona, a.reports_to)
            }
        })
        .collect();
    eprintln!("  agents, parents first: {}", order.join(", "));
    for m in &x.agent_config {
        eprintln!(
            "  agent config {}: {} key{} merged, {} already set and kept",
            m.file,
            m.added.len(),
            plural(m.added.len()),
            m.kept.len()
        );
    }
}

/// An installed pack's id, or a pack directory given as a path (a `/`, or a leading `.`: a pack id
/// can have neither).
fn trust_target(arg: &str) -> Result<trust::Target, DistError> {
    if !(arg.contains(['/', '\\']) || arg.starts_with('.')) {
        install::pack_dir_name(arg)?;
        return Ok(trust::Target::Installed(arg.to_string()));
    }
    let dir = std::path::Path::new(arg)
        .canonicalize()
        .map_err(|e| DistError::new("trust.dir", format!("cannot use {arg}: {e}")))?;
    let loaded = crate::pack::load(&dir);
    let pack = loaded.pack.ok_or_else(|| {
        DistError::new(
            "pack.invalid",
            format!("{} is not a valid pack; nothing to trust", dir.display()),
        )
        .with_report(loaded.report)
    })?;
    Ok(trust::Target::Dir {
        dir,
        pack_id: pack.manifest.id,
    })
}

pub fn trust(args: &TrustArgs) -> u8 {
    let root = match root_of(&args.root, args.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let target = match trust_target(&args.pack_id) {
        Ok(t) => t,
        Err(e) => return fail(&e, args.json),
    };
    let pack_id = target.pack_id().to_string();
    let is_dir = matches!(target, trust::Target::Dir { .. });
    let guard = match install::RootGuard::acquire(&root, is_dir) {
        Ok(Some(g)) => g,
        Ok(None) => {
            return fail(
                &DistError::new(
                    "pack.not-installed",
                    format!("{pack_id} is not installed in {}", root.display()),
                )
                .help("a pack directory is trusted as a path: `apiary trust ./my-pack`"),
                args.json,
            );
        }
        Err(e) => return fail(&e, args.json),
    };
    if args.revoke {
        return match trust::forget_target(&guard, &target) {
            Ok(had) => {
                if args.json {
                    print_json(&json!({ "ok": true, "pack_id": pack_id, "revoked": had }));
                } else if had {
                    eprintln!("Revoked trust for {}.", args.pack_id);
                } else {
                    eprintln!("{} had nothing trusted.", args.pack_id);
                }
                exit::OK
            }
            Err(e) => fail(&e, args.json),
        };
    }
    let review = match trust::review(&root, &target) {
        Ok(r) => r,
        Err(e) => return fail(&e, args.json),
    };
    let (want_hooks, want_mcp) = if args.hooks || args.mcp {
        (args.hooks, args.mcp)
    } else {
        (true, true)
    };
    let version = review.version.clone();
    let hooks: &[trust::HookStatus] = if want_hooks { &review.hooks } else { &[] };
    let servers: &[trust::McpStatus] = if want_mcp { &review.mcp_servers } else { &[] };
    let hooks_json = |hooks: &[trust::HookStatus]| -> Vec<serde_json::Value> {
        hooks
            .iter()
            .map(|h| json!({"path": h.path, "sha256": h.sha256, "kind": h.kind, "commands": h.commands}))
            .collect()
    };
    let servers_json = |servers: &[trust::McpStatus]| -> Vec<serde_json::Value> {
        servers
            .iter()
            .map(|m| {
                json!({"name": m.name, "sha256": m.sha256, "command_line": m.command_line,
                            "command": m.command, "args": m.args, "env": m.env,
                            "env_refs": m.env_refs, "used_by": m.used_by})
            })
            .collect()
    };
    if hooks.is_empty() && servers.is_empty() {
        if args.json {
            print_json(&json!({ "ok": true, "pack_id": pack_id, "version": version,
                                "dir": review.dir, "trusted": false, "hooks": [], "mcp_servers": [] }));
        } else {
            eprintln!(
                "{pack_id} {version} has no {}: nothing to trust.",
                match (want_hooks, want_mcp) {
                    (true, true) => "hooks and no stdio MCP servers",
                    (true, false) => "hooks",
                    _ => "stdio MCP servers",
                }
            );
        }
        return exit::OK;
    }
    if !args.json {
        print_review(&pack_id, &version, &review.dir, hooks, servers);
    }
    if !args.yes {
        let stdin = std::io::stdin();
        if args.json || !stdin.is_terminal() {
            let e = DistError::new(
                "trust.confirm",
                "trusting hooks and MCP servers needs confirmation and there is no terminal to ask on",
            )
            .help("review the list above, then rerun with --yes");
            return fail(&e, args.json);
        }
        eprint!(
            "Trust these for {pack_id} {version}? Script hooks and MCP servers will run on this host with your privileges. [y/N] "
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = stdin.lock().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            eprintln!("Not trusted.");
            return exit::FAILURE;
        }
    }
    match trust::record(&guard, &target, &review, want_hooks, want_mcp) {
        Ok(()) => {
            if args.json {
                print_json(&json!({
                    "ok": true,
                    "pack_id": pack_id,
                    "version": version,
                    "dir": review.dir,
                    "trusted": true,
                    "hooks": hooks_json(hooks),
                    "mcp_servers": servers_json(servers),
                }));
            } else {
                eprintln!(
                    "Trusted {} hook file{} and {} MCP server{} of {pack_id} {version}{}.",
                    hooks.len(),
                    plural(hooks.len()),
                    servers.len(),
                    plural(servers.len()),
                    if is_dir {
                        format!(" in {}", review.dir.display())
                    } else {
                        String::new()
                    }
                );
                let refs: std::collections::BTreeSet<&str> = servers
                    .iter()
                    .flat_map(|m| m.env_refs.iter().map(String::as_str))
                    .collect();
                if !refs.is_empty() {
                    let list: Vec<String> = refs.iter().map(|v| format!("\"{v}\"")).collect();
                    eprintln!(
                        "  The MCP servers read {} from your environment: each must be allowed in the overrides file:\n    [\"{pack_id}\"]\n    allow_env = [{}]",
                        refs.iter()
                            .map(|v| format!("${{{v}}}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        list.join(", ")
                    );
                }
            }
            exit::OK
        }
        Err(e) => fail(&e, args.json),
    }
}

/// What `trust` is about to record, for people.
fn print_review(
    pack_id: &str,
    version: &str,
    dir: &std::path::Path,
    hooks: &[trust::HookStatus],
    servers: &[trust::McpStatus],
) {
    eprintln!("{pack_id} {version} in {}:", dir.display());
    if !hooks.is_empty() {
        eprintln!("\n{} hook file{}:", hooks.len(), plural(hooks.len()));
    }
    for h in hooks {
        let kind = match h.kind {
            _ if h.commands.is_empty() => "carried file, not wired: apiary never runs it",
            dist::lock::HookKind::Component => "component (sandboxed)",
            dist::lock::HookKind::Script => "script (runs as a host process)",
        };
        eprintln!("\n  {}  [{kind}]", trust::quote(&h.path));
        eprintln!("    sha256  {}", h.sha256);
        eprintln!("    used by {}", h.used_by.join(", "));
        for c in &h.commands {
            eprintln!("    command {}", trust::quote(c));
        }
        if !h.intact {
            eprintln!("    ✗ the file changed since install (or cannot be read)");
        } else if h.trusted {
            eprintln!("    ✓ already trusted");
        }
    }
    if !servers.is_empty() {
        eprintln!(
            "\n{} stdio MCP server{} (the agent starts each on this host):",
            servers.len(),
            plural(servers.len())
        );
    }
    for m in servers {
        eprintln!("\n  {}", trust::quote(&m.name));
        eprintln!("    command {}", m.command_line);
        eprintln!("    sha256  {}", m.sha256);
        eprintln!("    used by {}", m.used_by.join(", "));
        if !m.env_refs.is_empty() {
            eprintln!(
                "    reads   {} from your environment (only if allowed: allow_env)",
                m.env_refs
                    .iter()
                    .map(|v| format!("${{{v}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if m.trusted {
            eprintln!("    ✓ already trusted");
        }
    }
    eprintln!();
}

pub fn list(args: &ListArgs) -> u8 {
    let root = match root_of(&args.root, args.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let guard = match install::RootGuard::acquire(&root, false) {
        Ok(g) => g,
        Err(e) => return fail(&e, args.json),
    };
    let lock = match guard
        .as_ref()
        .map(|_| dist::lock::Lock::load(&root))
        .transpose()
    {
        Ok(l) => l.unwrap_or_default(),
        Err(e) => return fail(&e, args.json),
    };
    drop(guard);
    let mut rows = Vec::new();
    for (id, entry) in &lock.packs {
        let (hooks, trusted) = match trust::status(&root, id) {
            Ok((_, hs)) => (hs.len(), hs.iter().filter(|h| h.trusted).count()),
            Err(_) => (0, 0),
        };
        rows.push(json!({
            "pack_id": id,
            "version": entry.version,
            "source": entry.source,
            "sha256": entry.sha256,
            "resolved": entry.resolved,
            "installed_at": entry.installed_at,
            "dir": root.join(id),
            "hooks": hooks,
            "trusted_hooks": trusted,
            "converted_from": entry.extra.get("converted_from"),
        }));
    }
    if args.json {
        print_json(&json!({ "root": root, "packs": rows }));
    } else if rows.is_empty() {
        eprintln!("No packs installed in {}.", root.display());
    } else {
        println!(
            "{:<40} {:<12} {:<20} {:<7} SOURCE",
            "PACK", "VERSION", "INSTALLED", "HOOKS"
        );
        for r in &rows {
            let hooks = format!(
                "{}/{}",
                r["trusted_hooks"].as_u64().unwrap_or(0),
                r["hooks"].as_u64().unwrap_or(0)
            );
            println!(
                "{:<40} {:<12} {:<20} {:<7} {}",
                r["pack_id"].as_str().unwrap_or(""),
                r["version"].as_str().unwrap_or(""),
                r["installed_at"].as_str().unwrap_or(""),
                hooks,
                r["source"].as_str().unwrap_or(""),
            );
            if let Some(f) = r["converted_from"]["format"].as_str() {
                println!("{:<40} (converted from {f})", "");
            }
        }
        eprintln!("(HOOKS: trusted/total)");
    }
    exit::OK
}

pub fn uninstall(args: &UninstallArgs) -> u8 {
    let root = match root_of(&args.root, args.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    match install::uninstall(&root, &args.pack_id) {
        Ok(r) => {
            if args.json {
                print_json(&json!({ "ok": true, "uninstalled": r }));
            } else {
                eprintln!(
                    "Uninstalled {}{} ({} file{} removed).",
                    r.pack_id,
                    r.version
                        .as_deref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default(),
                    r.removed_files,
                    if r.removed_files == 1 { "" } else { "s" }
                );
                for f in &r.agent_config {
                    eprintln!("  took the pack's keys back out of {f}");
                }
                if !r.kept.is_empty() {
                    eprintln!(
                        "  kept {} file{} the pack did not install, in {}:",
                        r.kept.len(),
                        if r.kept.len() == 1 { "" } else { "s" },
                        root.join(&r.pack_id).display()
                    );
                    for k in r.kept.iter().take(20) {
                        eprintln!("    {k}");
                    }
                }
            }
            exit::OK
        }
        Err(e) => fail(&e, args.json),
    }
}

pub fn verify(args: &VerifyArgs) -> u8 {
    let root = match root_of(&args.root, args.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    match verify::verify(&root, args.pack_id.as_deref()) {
        Ok(report) => {
            if args.json {
                print_json(&report);
            } else {
                for p in &report.packs {
                    let quarantined = p.hooks - p.trusted_hooks.min(p.hooks);
                    let hooks = if quarantined > 0 {
                        format!(
                            ", {quarantined} hook file{} quarantined",
                            plural(quarantined)
                        )
                    } else {
                        String::new()
                    };
                    if p.ok {
                        eprintln!("✓ {} {} ({} files{hooks})", p.pack_id, p.version, p.files);
                    } else {
                        eprintln!(
                            "✗ {} {}: {} problem{}",
                            p.pack_id,
                            p.version,
                            p.problems.len(),
                            if p.problems.len() == 1 { "" } else { "s" }
                        );
                        for pr in &p.problems {
                            eprintln!("    {}: {}", pr.kind, pr.message);
                        }
                    }
                }
                for u in &report.untracked {
                    eprintln!("? {u}: a directory pack.lock does not list (left alone)");
                }
                if report.packs.is_empty() {
                    eprintln!("No packs installed in {}.", root.display());
                }
            }
            if report.ok { exit::OK } else { exit::FAILURE }
        }
        Err(e) => fail(&e, args.json),
    }
}
