//! MCP server configuration (spec §7): the pack's `.mcp.json` and persona `mcp_servers` lists, the
//! transport rules (stdio and streamable HTTP only), `${VAR}` references and literal-secret checks.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::source::{Fields, SourceFile, suggest};
use crate::diag::{Diagnostic, Report};

/// Every key an entry may have, per the schema crate (shared with the converters).
use apiary_schema::mcp::KEYS as SERVER_KEYS;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServer {
    pub name: String,
    #[serde(flatten)]
    pub transport: Transport,
    /// `${VAR}` names the server's env or headers reference, resolved from the process env at start.
    pub env_refs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// Parses `.mcp.json`: `{"mcpServers": {name: {...}}}`.
pub fn parse_mcp_json(src: &SourceFile, report: &mut Report) -> Vec<McpServer> {
    let value: Value = match serde_json::from_str(&src.text) {
        Ok(v) => v,
        Err(e) => {
            let d = Diagnostic::error("mcp.json", format!("not valid JSON: {e}"))
                .in_file(&src.rel)
                .at_line_col(&src.text, e.line(), e.column());
            report.push(d);
            return vec![];
        }
    };
    let Value::Object(top) = &value else {
        report.push(
            Diagnostic::error("mcp.shape", "must contain a JSON object with `mcpServers`")
                .in_file(&src.rel),
        );
        return vec![];
    };
    let fields = Fields {
        src,
        map: top,
        prefix: vec![],
        area: "mcp",
    };
    let Some(servers) = fields.object(report, "mcpServers") else {
        if !top.contains_key("mcpServers") {
            report.push(
                Diagnostic::warning(
                    "mcp.empty",
                    "has no `mcpServers` object; no pack-level MCP servers",
                )
                .in_file(&src.rel),
            );
        }
        return vec![];
    };
    let outer = fields.nested("mcpServers", servers);
    let mut out = Vec::new();
    for (name, entry) in servers {
        match entry {
            Value::Object(m) => {
                if let Some(s) = parse_server(&outer.nested(name, m), report, name.clone()) {
                    out.push(s);
                }
            }
            other => outer.type_error(report, name, "a server object", other),
        }
    }
    out
}

/// Parses a persona's `mcp_servers` list: `[{name, command, args, env} | {name, type: http, url}]`.
pub fn parse_persona_list(fields: &Fields<'_>, report: &mut Report) -> Vec<McpServer> {
    let Some(value) = fields.get("mcp_servers") else {
        return vec![];
    };
    let Value::Array(items) = value else {
        fields.type_error(report, "mcp_servers", "a list of server objects", value);
        return vec![];
    };
    let mut out = Vec::new();
    for item in items {
        let Value::Object(m) = item else {
            fields.type_error(report, "mcp_servers", "a list of server objects", item);
            continue;
        };
        let f = fields.nested("mcp_servers", m);
        let Some(name) = f.string(report, "name").filter(|n| !n.trim().is_empty()) else {
            let d = Diagnostic::error("mcp.name", "an `mcp_servers` entry has no `name`");
            report.push(
                fields
                    .src
                    .diag(d, &[&fields.prefix[..], &["mcp_servers"]].concat()),
            );
            continue;
        };
        if let Some(s) = parse_server(&f, report, name) {
            out.push(s);
        }
    }
    out
}

fn parse_server(f: &Fields<'_>, report: &mut Report, name: String) -> Option<McpServer> {
    for key in f.map.keys().filter(|k| !SERVER_KEYS.contains(&k.as_str())) {
        let d = Diagnostic::warning(
            "mcp.unknown-key",
            format!("unknown key `{key}` in MCP server `{name}`; ignored"),
        );
        let d = match suggest(key, SERVER_KEYS) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d,
        };
        report.push(f.src.diag(d, &[&f.prefix[..], &[key.as_str()]].concat()));
    }
    let transport = read_transport(f, report, &name)?;
    let env_refs = transport_env_refs(&transport);
    Some(McpServer {
        name,
        transport,
        env_refs,
    })
}

/// The server's transport, checked: stdio (`command`, `args`, `env`) or streamable HTTP (`url`,
/// `headers`); `None` (reported) for SSE, an unknown transport or a missing command or URL.
fn read_transport(f: &Fields<'_>, report: &mut Report, name: &str) -> Option<Transport> {
    let here = |key: &'static str| -> Vec<&str> { [&f.prefix[..], &[key]].concat() };
    // Point transport findings at the key the author wrote: `type` or its synonym `transport`.
    let kind_key = if f.get("type").is_some() {
        "type"
    } else {
        "transport"
    };
    let kind = f.string(report, kind_key);
    let kind = kind.as_deref().map(str::to_ascii_lowercase);
    if kind.as_deref() == Some("sse") {
        let d = Diagnostic::error("mcp.sse", format!("MCP server `{name}` uses the SSE transport, which ACP runtimes reject"))
            .help("SSE is unsupported, migrate to streamable_http: set `\"type\": \"http\"` and the server's streamable HTTP `url`");
        report.push(f.src.diag(d, &here(kind_key)));
        return None;
    }
    let is_http = matches!(
        kind.as_deref(),
        Some("http" | "streamable_http" | "streamable-http")
    );
    if let Some(k) = kind.as_deref().filter(|k| !is_http && *k != "stdio") {
        let d = Diagnostic::error(
            "mcp.transport",
            format!("MCP server `{name}` has unknown transport `{k}`"),
        )
        .help("use `stdio` (with `command`) or `http` (streamable HTTP, with `url`)");
        report.push(f.src.diag(d, &here(kind_key)));
        return None;
    }
    if is_http || (kind.is_none() && f.get("url").is_some() && f.get("command").is_none()) {
        let Some(url) = f.string(report, "url") else {
            let d = Diagnostic::error("mcp.url", format!("HTTP MCP server `{name}` has no `url`"));
            report.push(f.src.diag(d, &f.prefix));
            return None;
        };
        let headers = string_map(f, report, "headers");
        check_secrets(f, report, name, "headers", &headers);
        Some(Transport::Http { url, headers })
    } else {
        let Some(command) = f.string(report, "command").filter(|c| !c.trim().is_empty()) else {
            let d = Diagnostic::error("mcp.command", format!("MCP server `{name}` has neither `command` nor `url`"))
                .help("a stdio server needs `command` (and optional `args`, `env`); an HTTP server needs `\"type\": \"http\"` and `url`");
            report.push(f.src.diag(d, &f.prefix));
            return None;
        };
        let env = string_map(f, report, "env");
        check_secrets(f, report, name, "env", &env);
        let args = f.string_list(report, "args").unwrap_or_default();
        check_command(f, report, name, &command, &args);
        Some(Transport::Stdio { command, args, env })
    }
}

/// Every `${VAR}` the server's interpolated values name (args and env, or the URL and headers),
/// in order, once each.
fn transport_env_refs(transport: &Transport) -> Vec<String> {
    let mut env_refs = Vec::new();
    for v in transport_values(transport) {
        for r in var_refs(v) {
            if !env_refs.contains(&r) {
                env_refs.push(r);
            }
        }
    }
    env_refs
}

/// The values `${VAR}`s are interpolated in: args and env, or the URL and headers.
fn transport_values(transport: &Transport) -> Vec<&String> {
    match transport {
        Transport::Stdio { args, env, .. } => args.iter().chain(env.values()).collect(),
        Transport::Http { url, headers } => std::iter::once(url).chain(headers.values()).collect(),
    }
}

/// Shells: whatever their arguments, they run any command.
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "pdksh",
    "ash",
    "yash",
    "fish",
    "csh",
    "tcsh",
    "rc",
    "nu",
    "xonsh",
    "elvish",
    "busybox",
    "cmd",
    "powershell",
    "pwsh",
];
/// Interpreters (by family: `python3.12` is `python`) and the options that make them run code
/// given inline on the command line.
const INLINE_CODE: &[(&str, &[&str])] = &[
    ("python", &["-c"]),
    ("pypy", &["-c"]),
    ("node", &["-e", "--eval", "-p", "--print"]),
    ("nodejs", &["-e", "--eval", "-p", "--print"]),
    ("bun", &["-e", "--eval", "-p", "--print"]),
    ("deno", &["eval"]),
    ("perl", &["-e", "-E"]),
    ("ruby", &["-e"]),
    ("php", &["-r"]),
    ("lua", &["-e"]),
    ("luajit", &["-e"]),
    ("rscript", &["-e"]),
    ("julia", &["-e", "--eval"]),
    ("osascript", &["-e"]),
];
/// Programs whose first argument is always a program text.
const ALWAYS_CODE: &[&str] = &["awk", "gawk", "mawk", "nawk"];
/// Programs that run their arguments as a command: the command they run is checked.
const WRAPPERS: &[&str] = &[
    "env", "nohup", "nice", "timeout", "stdbuf", "setsid", "sudo", "doas", "exec", "xargs", "time",
    "chrt", "ionice", "taskset", "unbuffer", "script", "su", "runuser", "flock", "chroot",
];

/// A program's name as the checks compare it: its last path component, lower-case, without `.exe`.
fn program_name(command: &str) -> String {
    let base = command.rsplit(['/', '\\']).next().unwrap_or(command);
    let base = base.to_ascii_lowercase();
    base.strip_suffix(".exe")
        .map(str::to_string)
        .unwrap_or(base)
}

/// `name` is `family` or `family` plus a version (`python3`, `python3.12`, `perl5.36`).
fn in_family(name: &str, family: &str) -> bool {
    name.strip_prefix(family)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Why a stdio command line deserves the operator's attention, if it does: a shell, an
/// interpreter given inline code, `env -S`. Wrappers (`env`, `nohup`, `timeout`, `sudo`, ...) are
/// looked through. Returns `(code, what)`.
pub fn risky_command(command: &str, args: &[String]) -> Option<(&'static str, String)> {
    if let Some(risk) = direct_risk(command, args) {
        return Some(risk);
    }
    if !WRAPPERS.contains(&program_name(command).as_str()) {
        return None;
    }
    // The wrapped command is one of the words that are not options (an option's value, such as
    // `sudo -u root`, looks the same, and wrappers nest): check the first few as the start of a
    // command line. Bounded, so a hostile list of a million words costs little.
    (0..args.len())
        .filter(|&i| !args[i].starts_with('-'))
        .take(16)
        .find_map(|i| direct_risk(&args[i], &args[i + 1..]))
}

/// [`risky_command`] without looking through wrappers.
fn direct_risk(command: &str, args: &[String]) -> Option<(&'static str, String)> {
    let name = program_name(command);
    if SHELLS.contains(&name.as_str()) {
        return Some((
            "mcp.shell-command",
            format!("runs the shell `{name}`, which can run any command"),
        ));
    }
    if ALWAYS_CODE.contains(&name.as_str()) {
        return Some((
            "mcp.inline-code",
            format!("runs `{name}` with a program given on its command line"),
        ));
    }
    let options = || args.iter().take_while(|a| *a != "--");
    if name == "env"
        && options().any(|a| {
            a.starts_with("--split-string")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('S'))
        })
    {
        return Some((
            "mcp.shell-command",
            "runs `env -S`, which splits one string into any command line".to_string(),
        ));
    }
    let (_, flags) = INLINE_CODE
        .iter()
        .find(|(family, _)| in_family(&name, family))?;
    let inline = options().find_map(|a| {
        flags.iter().find(|flag| {
            if flag.len() == 2 && flag.starts_with('-') {
                // A cluster: `python -Ic`, `perl -ne`.
                a.starts_with('-') && !a.starts_with("--") && a[1..].contains(&flag[1..])
            } else {
                a == *flag || a.starts_with(&format!("{flag}="))
            }
        })
    })?;
    Some((
        "mcp.inline-code",
        format!("runs `{name} {inline}` with code given on its command line"),
    ))
}

/// `pack validate` warnings for a stdio command: a shell or inline code, an absolute path, a path
/// with `..`. Each runs on the operator's host once trusted, so the reviewer should look twice.
fn check_command(f: &Fields<'_>, report: &mut Report, name: &str, command: &str, args: &[String]) {
    const HELP: &str = "a stdio MCP server runs on the operator's host: apiary hands it to the agent only once the operator has reviewed and trusted it (`apiary trust`); prefer a server program with plain arguments";
    let at: Vec<&str> = [&f.prefix[..], &["command"]].concat();
    if let Some((code, what)) = risky_command(command, args) {
        let d = Diagnostic::warning(code, format!("MCP server `{name}` {what}")).help(HELP);
        report.push(f.src.diag(d, &at));
    }
    let bytes = command.as_bytes();
    let drive = bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'/' | b'\\');
    if command.starts_with(['/', '\\', '~']) || drive {
        let d = Diagnostic::warning(
            "mcp.absolute-command",
            format!(
                "MCP server `{name}` runs `{command}` by absolute path, a program outside the pack"
            ),
        )
        .help(HELP);
        report.push(f.src.diag(d, &at));
    } else if command.split(['/', '\\']).any(|part| part == "..") {
        let d = Diagnostic::warning(
            "mcp.absolute-command",
            format!("MCP server `{name}` runs `{command}`, a path with `..` that leaves the directory it starts in"),
        )
        .help(HELP);
        report.push(f.src.diag(d, &at));
    }
}

fn string_map(f: &Fields<'_>, report: &mut Report, key: &'static str) -> BTreeMap<String, String> {
    let Some(map) = f.object(report, key) else {
        return BTreeMap::new();
    };
    let inner = f.nested(key, map);
    map.iter()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Number(n) => Some((k.clone(), n.to_string())),
            Value::Bool(b) => Some((k.clone(), b.to_string())),
            other => {
                inner.type_error(report, k, "a string", other);
                None
            }
        })
        .collect()
}

/// Names of the `${VAR}` (and `${VAR:-default}`) references in a value, in order of appearance.
pub fn var_refs(value: &str) -> Vec<String> {
    var_refs_with_defaults(value)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// Each `${VAR}` reference in a value and whether it has a `:-default` (which applies when the
/// variable is unset or not allowed, so the reference never stops the server).
fn var_refs_with_defaults(value: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let (name, has_default) = match after[..end].split_once(":-") {
            Some((n, _)) => (n, true),
            None => (&after[..end], false),
        };
        if super::is_var_name(name) {
            out.push((name.to_string(), has_default));
        }
        rest = &after[end + 1..];
    }
    out
}

impl McpServer {
    /// The `${VAR}`s this server cannot do without: referenced at least once with no default.
    /// A variable only ever written `${VAR:-default}` is optional.
    pub fn required_env_refs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for v in transport_values(&self.transport) {
            for (name, has_default) in var_refs_with_defaults(v) {
                if !has_default && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }
}

const SECRET_KEY_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "AUTHORIZATION",
];
const SECRET_VALUE_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "github_pat_",
    "glpat-",
    "sk-",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "AIza",
];

/// Literal values where a `${VAR}` reference belongs: pack files are shared, secrets must not be.
fn check_secrets(
    f: &Fields<'_>,
    report: &mut Report,
    name: &str,
    key: &'static str,
    values: &BTreeMap<String, String>,
) {
    for (k, v) in values {
        if v.contains("${") || v.trim().is_empty() {
            continue;
        }
        let upper = k.to_ascii_uppercase();
        let key_says_secret = SECRET_KEY_WORDS.iter().any(|w| upper.contains(w));
        let value_looks_secret = SECRET_VALUE_PREFIXES
            .iter()
            .any(|p| v.starts_with(p) || v.contains(&format!(" {p}")));
        if key_says_secret || value_looks_secret {
            let d = Diagnostic::warning(
                "mcp.literal-secret",
                format!("MCP server `{name}` has a literal value for `{k}` that looks like a secret"),
            )
            .help(format!("never ship secrets in a pack: write `\"{k}\": \"${{{}}}\"` and set it in the operator's environment", var_suggestion(k)));
            report.push(f.src.diag(d, &[&f.prefix[..], &[key, k.as_str()]].concat()));
        }
    }
}

fn var_suggestion(key: &str) -> String {
    let s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("VAR_{s}")
    } else {
        s
    }
}

/// Pack servers are the base set; a persona server with the same name replaces it whole. Sorted by name.
pub fn merge(pack: &[McpServer], persona: &[McpServer]) -> Vec<McpServer> {
    let mut by_name: BTreeMap<&str, &McpServer> =
        pack.iter().map(|s| (s.name.as_str(), s)).collect();
    for s in persona {
        by_name.insert(&s.name, s);
    }
    by_name.into_values().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_var_references() {
        assert_eq!(
            var_refs("${A}-${B_2} ${} ${3X} ${unterminated"),
            ["A", "B_2"]
        );
        assert!(var_refs("plain").is_empty());
        assert_eq!(
            var_refs_with_defaults("${A:-x} ${B} ${C:-}"),
            [("A".into(), true), ("B".into(), false), ("C".into(), true)]
        );
    }

    /// The class, not the example: shells by any path or case, interpreters given inline code
    /// (flag clusters, long forms), wrappers looked through; ordinary servers are not flagged.
    #[test]
    fn risky_commands_are_recognised_through_paths_versions_and_wrappers() {
        let risky = |cmd: &str, args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            risky_command(cmd, &args).map(|r| r.0)
        };
        for (cmd, args) in [
            ("sh", &["-c", "id"][..]),
            ("/bin/BASH", &[]),
            ("C:\\Windows\\System32\\cmd.exe", &["/c", "dir"]),
            ("pwsh", &["-Command", "x"]),
            ("fish", &[]),
            ("env", &["-S", "sh -c id"]),
            ("/usr/bin/env", &["-iS", "x"]),
            ("env", &["A=1", "bash", "x.sh"]),
            ("sudo", &["-u", "root", "zsh"]),
            ("nohup", &["timeout", "5", "dash", "-c", "x"]),
        ] {
            assert_eq!(
                risky(cmd, args),
                Some("mcp.shell-command"),
                "{cmd} {args:?}"
            );
        }
        for (cmd, args) in [
            ("python3.12", &["-c", "x"][..]),
            ("python", &["-Ic", "x"]),
            ("node", &["--eval=x"]),
            ("nodejs", &["-p", "x"]),
            ("perl", &["-ne", "x"]),
            ("ruby", &["-e", "x"]),
            ("php", &["-r", "x"]),
            ("deno", &["eval", "x"]),
            ("awk", &["BEGIN{system(\"id\")}"]),
            ("env", &["python3", "-c", "x"]),
        ] {
            assert_eq!(risky(cmd, args), Some("mcp.inline-code"), "{cmd} {args:?}");
        }
        for (cmd, args) in [
            ("github-mcp-server", &["stdio"][..]),
            ("npx", &["-y", "@modelcontextprotocol/server-memory"]),
            ("python3", &["-m", "mcp_server"]),
            ("node", &["server.js"]),
            ("shellcheck-mcp", &[]),
            ("python3", &["server.py", "--", "-c"]),
        ] {
            assert_eq!(risky(cmd, args), None, "{cmd} {args:?}");
        }
        // A hostile list of nested wrappers costs little.
        let many: Vec<String> = std::iter::repeat_n("nice".to_string(), 200_000).collect();
        let t = std::time::Instant::now();
        assert_eq!(risky_command("nice", &many), None);
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn persona_server_replaces_pack_server_whole_and_output_is_sorted() {
        let stdio = |name: &str, cmd: &str| McpServer {
            name: name.into(),
            transport: Transport::Stdio {
                command: cmd.into(),
                args: vec![],
                env: BTreeMap::new(),
            },
            env_refs: vec![],
        };
        let merged = merge(
            &[stdio("zeta", "z"), stdio("github", "pack-gh")],
            &[stdio("github", "persona-gh"), stdio("alpha", "a")],
        );
        let names: Vec<_> = merged.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "github", "zeta"]);
        assert_eq!(merged[1], stdio("github", "persona-gh"));
    }
}
