//! Real third-party ACP agents under `apiary up`: Claude Code (`@zed-industries/claude-code-acp`),
//! Codex (`@zed-industries/codex-acp`) and Gemini CLI (`@google/gemini-cli --experimental-acp`),
//! installed from npm by `.ci/setup` into `.ci/acp-agents/`. No model service is reachable from here, so each agent is pointed at a
//! provider stub on 127.0.0.1 ([`Provider`]) speaking its provider's real streaming API; the agent,
//! its ACP implementation and apiary are all real.
//!
//! Claude Code refuses to run as root: when the tests run as root (CI), its agent runs as the
//! unprivileged user `apiary-ci` that `.ci/setup` creates (`up --agent-user`).
//!
//! Every agent runs confined, as by default: its key is granted in the overrides file
//! (`agent_env`) and arrives as a placeholder that apiary's gateway replaces; the stub's port is
//! granted (`agent_net`) for the MCP server and for Codex, whose provider is in its own config.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::live::{Up, e_tags, event_of, write_pack};
use crate::support::provider::{Provider, Script};

const AGENT_USER: &str = "apiary-ci";
/// The operator's Anthropic key in the Claude Code tests: only apiary's gateway ever holds it.
const CLAUDE_KEY: &str = "sk-ant-operator-0123456789abcdef";

/// Where `.ci/setup` installs the agents: `.ci/acp-agents/`, and, when that checkout is private to
/// root, a copy in `/opt/apiary-acp-agents/` that the agent's user can reach.
fn agent_dirs() -> Vec<PathBuf> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/acp-agents");
    vec![
        local.canonicalize().unwrap_or(local),
        PathBuf::from("/opt/apiary-acp-agents"),
    ]
}

/// Skips (or fails under CI, where `.ci/setup` ran) with the reason.
fn skip(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
}

/// The installed agent `name` that `user` (when given) can run.
fn installed(name: &str, user: Option<&str>) -> Option<PathBuf> {
    let found = agent_dirs()
        .into_iter()
        .map(|d| d.join("node_modules/.bin").join(name))
        .filter(|p| p.is_file())
        .find(|p| user.is_none_or(|u| runs_as(u, &["test", "-x", p.to_str().unwrap()])));
    if found.is_none() {
        skip(&format!(
            "{name} is not installed where {} can run it: run .ci/setup (npm ci into .ci/acp-agents)",
            user.unwrap_or("this user")
        ));
    }
    found
}

fn runs_as(user: &str, cmd: &[&str]) -> bool {
    std::process::Command::new("runuser")
        .args(["-u", user, "--"])
        .args(cmd)
        .status()
        .is_ok_and(|s| s.success())
}

fn id(args: &[&str]) -> Option<u32> {
    let out = std::process::Command::new("id").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// When the tests run as root, the unprivileged user an agent that refuses root runs as (its uid
/// too); `Err(())` when that user is missing (skipped).
fn agent_user() -> Result<Option<(&'static str, u32)>, ()> {
    if id(&["-u"]) != Some(0) {
        return Ok(None);
    }
    match id(&["-u", AGENT_USER]) {
        Some(uid) => Ok(Some((AGENT_USER, uid))),
        None => {
            skip(&format!(
                "the agent refuses root and user {AGENT_USER} does not exist (.ci/setup creates it)"
            ));
            Err(())
        }
    }
}

/// A scratch home the agent's user can read (tempdirs are private to their owner).
fn open_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    home
}

/// A pack with persona `bee` on `runtime`, with `model`, a skill and an http MCP server on the stub.
fn pack(root: &Path, runtime: &str, model: &str, provider: &Provider) {
    let bee = format!(
        "---\nname: bee\ndisplay_name: Bee\ndescription: answers questions\nruntime: {runtime}\n\
         model: {model}\nsubscribe: [\"general\"]\nmcp_servers:\n  - name: hive\n    type: http\n    \
         url: {}/mcp\n---\nYou are Bee, who answers in one sentence.\n",
        provider.url
    );
    write_pack(
        root,
        "com.example.real-agents",
        &[("bee", &bee)],
        &[(
            "skills/pollen-count/SKILL.md",
            "---\nname: pollen-count\ndescription: Counts pollen.\n---\nCount carefully.\n",
        )],
    );
}

/// Posts a mention and checks that the stub's answer comes back as bee's reply in its thread;
/// returns the workspace path.
fn mention_is_answered(up: &mut Up, answer: &str) {
    let id = up.post("general", "@bee how much pollen today?", &[]);
    let reply = up.reply_to("bee", &id);
    let history = up.history("general");
    let event = history
        .iter()
        .find(|e| e["id"] == reply.as_str())
        .unwrap_or_else(|| panic!("reply {reply} not on the relay: {history:#?}"));
    assert_eq!(event["content"], answer, "{event}");
    assert!(
        e_tags(event)
            .iter()
            .any(|(e, marker)| e == &id && marker == "root"),
        "the reply is not in the mention's thread: {event}"
    );
}

/// Grants pack `pack`'s agents the variables `vars` and the stub's port, in the operator's
/// overrides file (appended: a test may grant several packs), with `extra` TOML lines.
fn grant(home: &Path, pack: &str, provider: &Provider, vars: &[&str], extra: &str) {
    let port = provider
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/');
    let vars: Vec<String> = vars.iter().map(|v| format!("\"{v}\"")).collect();
    let dir = home.join(".config/apiary");
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("overrides.toml"))
        .unwrap();
    use std::io::Write;
    writeln!(
        file,
        "[\"{pack}\"]\nagent_env = [{}]\nagent_net = [\"127.0.0.1:{port}\"]\n{extra}",
        vars.join(", ")
    )
    .unwrap();
}

/// Codex's grants: its key, its home (its config and where it writes its sessions).
fn grant_codex(home: &Path, pack: &str, provider: &Provider, codex: &Path, extra: &str) {
    let extra = format!("agent_write = [\"{}\"]\n{extra}", codex.display());
    grant(
        home,
        pack,
        provider,
        &["OPENAI_API_KEY", "CODEX_HOME"],
        &extra,
    );
}

/// Everything the model was asked, as one text (system prompt, messages, input).
fn asked(body: &Value) -> String {
    body.to_string()
}

#[test]
fn claude_code_answers_a_mention_on_its_real_agent() {
    let Ok(user) = agent_user() else { return };
    let Some(bin) = installed("claude-code-acp", user.map(|u| u.0)) else {
        return;
    };
    let agent = bin.display().to_string();
    let answer = "Forty grains of pollen, says the stub.";
    let provider = Provider::start(answer);
    let home = open_home();
    let root = home.path().join("pack");
    pack(&root, "claude-code", "haiku", &provider);
    let ws = home.path().join("ws");
    let cwd = ws.join("com.example.real-agents/bee");
    std::fs::create_dir_all(&cwd).unwrap();
    #[cfg(unix)]
    if let Some((_, uid)) = user {
        // The workspace is the agent's: its user owns it (apiary, as root, still writes in it).
        std::os::unix::fs::chown(&cwd, Some(uid), None).unwrap();
    }
    grant(
        home.path(),
        "com.example.real-agents",
        &provider,
        &["ANTHROPIC_API_KEY"],
        "",
    );
    let mut args = vec!["--agent", &agent, "--workspace-root", ws.to_str().unwrap()];
    if let Some((name, _)) = user {
        args.extend(["--agent-user", name]);
    }
    let mut up = Up::start(
        home.path(),
        &[&root],
        &args,
        &[
            ("ANTHROPIC_BASE_URL", provider.url.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-stub-real-key"),
        ],
    );
    let ready = up.wait_for(|l| l.starts_with("persona bee ready"));
    // Claude Code does not take a system prompt over ACP: it goes in front of each prompt.
    assert!(ready.contains("system_prompt=prefix"), "{ready}");
    mention_is_answered(&mut up, answer);

    // The persona's model (`haiku`, offered in its `session/new` answer) was selected with
    // `session/set_model` and reached the provider, in a streamed request that
    // carries the persona's prompt, its skill list and its workspace as the agent's cwd.
    let turn = provider.wait_for("a streamed request for the persona's model", |s| {
        s.path.starts_with("/v1/messages?") || s.path == "/v1/messages"
    });
    let streamed: Vec<_> = provider
        .requests()
        .into_iter()
        .filter(|s| s.path.split('?').next() == Some("/v1/messages") && s.body["stream"] == true)
        .collect();
    assert!(
        streamed.iter().any(|s| s.body["model"]
            .as_str()
            .is_some_and(|m| m.starts_with("claude-haiku"))),
        "models asked: {:?} (first: {})",
        streamed
            .iter()
            .map(|s| &s.body["model"])
            .collect::<Vec<_>>(),
        turn.path
    );
    let all: String = streamed.iter().map(|s| asked(&s.body)).collect();
    assert!(all.contains("You are Bee, who answers in one sentence."));
    assert!(
        all.contains("pollen-count"),
        "the skill list is not in the prompt"
    );
    assert!(
        all.contains(cwd.to_str().unwrap()),
        "the agent's cwd is not the workspace"
    );
    assert!(cwd.join(".agents/skills/pollen-count/SKILL.md").is_file());
    // The persona's MCP server was handed to the agent in `session/new`: the agent connected to it.
    provider.wait_for("the agent connecting to the persona's MCP server", |s| {
        s.path == "/mcp" && s.body["method"] == "initialize"
    });
    up.stop_ok();
}

/// Codex reads its provider from `$CODEX_HOME/config.toml`: the stub, on the Responses API.
fn codex_home(home: &Path, provider: &Provider) -> PathBuf {
    let dir = home.join("codex");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model_provider = \"stub\"\nmodel = \"gpt-5.4\"\n\n[model_providers.stub]\nname = \"stub\"\n\
             base_url = \"{}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
            provider.url
        ),
    )
    .unwrap();
    dir
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn codex_answers_a_mention_on_its_real_agent() {
    let Some(bin) = installed("codex-acp", None) else {
        return;
    };
    let answer = "Thirty grains of pollen, says the stub.";
    let provider = Provider::start(answer);
    let home = open_home();
    let root = home.path().join("pack");
    pack(&root, "codex", "gpt-5.4-mini", &provider);
    let ws = home.path().join("ws");
    let codex = codex_home(home.path(), &provider);
    grant_codex(
        home.path(),
        "com.example.real-agents",
        &provider,
        &codex,
        "",
    );
    let path = path_with(bin.parent().unwrap());
    // `--agent codex`: the runtime's preset, `codex-acp` found on PATH.
    let mut up = Up::start(
        home.path(),
        &[&root],
        &["--agent", "codex", "--workspace-root", ws.to_str().unwrap()],
        &[
            ("PATH", path.as_str()),
            ("CODEX_HOME", codex.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-stub"),
        ],
    );
    up.wait_for(|l| l.starts_with("persona bee ready"));
    mention_is_answered(&mut up, answer);

    // Codex takes no model variable: apiary picked the persona's model from the options its
    // `session/new` offered (`session/set_config_option`), and the request carries it.
    let turn = provider.wait_for("a Responses request", |s| s.path == "/v1/responses");
    assert_eq!(turn.body["model"], "gpt-5.4-mini", "{}", turn.body["model"]);
    assert_eq!(turn.body["stream"], true);
    let cwd = ws.join("com.example.real-agents/bee");
    let text = asked(&turn.body);
    assert!(text.contains("You are Bee, who answers in one sentence."));
    assert!(
        text.contains("pollen-count"),
        "the skill list is not in the prompt"
    );
    assert!(
        text.contains(cwd.to_str().unwrap()),
        "the agent's cwd is not the workspace"
    );
    provider.wait_for("the agent connecting to the persona's MCP server", |s| {
        s.path == "/mcp" && s.body["method"] == "initialize"
    });
    up.stop_ok();
}

/// A runtime's provider key is the operator's to grant: Codex with `OPENAI_API_KEY` set in
/// apiary's environment but not granted to the pack is refused before it starts, with the line to
/// add, and no request reaches the provider.
#[test]
fn codex_without_its_key_granted_is_refused_naming_the_setting() {
    let Some(bin) = installed("codex-acp", None) else {
        return;
    };
    let provider = Provider::start("unused");
    let home = open_home();
    let root = home.path().join("pack");
    pack(&root, "codex", "gpt-5.4-mini", &provider);
    let codex = codex_home(home.path(), &provider);
    let path = path_with(bin.parent().unwrap());
    let mut up = Up::spawn(
        home.path(),
        &[&root],
        &["--agent", "codex", "--json"],
        &[
            ("PATH", path.as_str()),
            ("CODEX_HOME", codex.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-operator-real"),
        ],
    );
    let line = up.wait_for(|l| event_of(l) == "persona_refused");
    let note: Value = serde_json::from_str(&line).unwrap();
    let reason = note["reason"].as_str().unwrap();
    assert!(
        reason.contains("the codex runtime needs its provider key"),
        "{reason}"
    );
    assert!(
        reason.contains(r#"agent_env = ["OPENAI_API_KEY"]"#)
            && reason.contains(r#"["com.example.real-agents"]"#),
        "{reason}"
    );
    assert!(
        provider
            .requests()
            .iter()
            .all(|s| s.path != "/v1/responses"),
        "no model request without credentials"
    );
}

/// `apiary up --json` with one pack of Claude Code personas (`(name, extra frontmatter)`), as
/// `apiary-ci` when the tests run as root; the workspaces are that user's. `None`: skipped.
fn claude_up(
    home: &Path,
    provider: &Provider,
    personas: &[(&str, &str)],
    args: &[&str],
) -> Option<(Up, PathBuf)> {
    let user = agent_user().ok()?;
    let bin = installed("claude-code-acp", user.map(|u| u.0))?;
    let agent = bin.display().to_string();
    let root = home.join("pack");
    let files: Vec<(String, String)> = personas
        .iter()
        .map(|(name, extra)| {
            let text = format!(
                "---\nname: {name}\ndisplay_name: {name}\ndescription: uses tools\nruntime: claude-code\n\
                 model: haiku\nsubscribe: [\"general\"]\n{extra}---\nYou are {name}.\n"
            );
            (name.to_string(), text)
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_pack(&root, "com.example.claude-tools", &refs, &[]);
    let ws = home.join("ws");
    for (name, _) in personas {
        let cwd = ws.join("com.example.claude-tools").join(name);
        std::fs::create_dir_all(&cwd).unwrap();
        #[cfg(unix)]
        if let Some((_, uid)) = user {
            std::os::unix::fs::chown(&cwd, Some(uid), None).unwrap();
        }
    }
    let mut all = vec![
        "--json",
        "--agent",
        &agent,
        "--workspace-root",
        ws.to_str().unwrap(),
    ];
    if let Some((name, _)) = user {
        all.extend(["--agent-user", name]);
    }
    all.extend_from_slice(args);
    grant(
        home,
        "com.example.claude-tools",
        provider,
        &["ANTHROPIC_API_KEY"],
        "",
    );
    let up = Up::start(
        home,
        &[&root],
        &all,
        &[
            ("ANTHROPIC_BASE_URL", provider.url.as_str()),
            ("ANTHROPIC_API_KEY", CLAUDE_KEY),
        ],
    );
    Some((up, ws.join("com.example.claude-tools")))
}

/// The `--json` note of `event` for `persona` matching `pred`.
fn note(up: &mut Up, event: &str, persona: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let line = up.wait_for(|l| {
        let v: Value = serde_json::from_str(l).unwrap_or_default();
        v["event"] == event && v["persona"] == persona && pred(&v)
    });
    serde_json::from_str(&line).unwrap()
}

/// A directory the agent's user may write in.
fn agent_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
}

/// The stub answers with a plan (`TodoWrite`), then a `Write` of `file`, then the text: Claude
/// Code runs its real tool machinery, and asks permission for the `Write`.
fn write_script(file: &Path, answer: &str) -> Script {
    Script {
        tools: vec![
            (
                "TodoWrite".into(),
                json!({"todos": [{"content": "Write the note", "status": "in_progress",
                                  "activeForm": "Writing the note"}]}),
            ),
            (
                "Write".into(),
                json!({"file_path": file, "content": "forty grains\n"}),
            ),
        ],
        answer: answer.into(),
        ..Script::default()
    }
}

/// The tool policy decides Claude Code's real tools, whatever `--permission` says: `deny:
/// [kind:edit]` rejects its permission request for `Write` (the tool policy's reason in the
/// `permission` event), `deny: [Write]` reaches Claude Code as `disallowedTools`, so the model is
/// never offered the tool. Either way the file is not written; plan and tool-call updates are
/// surfaced as events.
#[test]
fn claude_code_tools_refused_by_the_tool_policy_do_not_run() {
    let home = open_home();
    let out = home.path().join("out");
    agent_dir(&out);
    let file = out.join("note.txt");
    let provider = Provider::scripted(write_script(&file, "Could not write it, says the stub."));
    let Some((mut up, _)) = claude_up(
        home.path(),
        &provider,
        &[
            ("wasp", "x-tool-policy:\n  deny: [\"kind:edit\"]\n"),
            ("hornet", "x-tool-policy:\n  deny: [Write]\n"),
        ],
        &["--permission", "allow-once"],
    ) else {
        return;
    };
    let id = up.post("general", "@wasp please write the note", &[]);
    // Claude Code ends the turn on a refusal (its `interrupt`): a turn without text.
    let ended = note(&mut up, "turn", "wasp", |v| v["id"] == id.as_str());
    assert_eq!(ended["published"], false, "{ended}");
    let refused = note(&mut up, "permission", "wasp", |v| v["tool"] == "Write");
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["decided_by"], "tool-policy", "{refused}");
    assert_eq!(refused["kind"], "edit", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("denied by `kind:edit`"),
        "{refused}"
    );
    let plan = note(&mut up, "plan", "wasp", |_| true);
    assert_eq!(plan["entries"], 1, "{plan}");
    note(&mut up, "tool_call", "wasp", |v| {
        v["tool"] == "Write" && v["status"] == "failed"
    });
    assert!(!file.exists(), "the refused Write ran");

    let id = up.post("general", "@hornet please write the note", &[]);
    note(&mut up, "reply", "hornet", |v| v["to"] == id.as_str());
    assert!(!file.exists(), "the denied Write ran");
    // Claude Code took the deny list: the model was never offered `Write` in hornet's requests,
    // and was in wasp's.
    let offered = |who: &str| -> Vec<bool> {
        provider
            .requests()
            .iter()
            .filter(|s| {
                s.body["tools"].is_array()
                    && s.body.to_string().contains(&format!("You are {who}."))
            })
            .map(|s| {
                s.body["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["name"] == "Write")
            })
            .collect()
    };
    let (wasp, hornet) = (offered("wasp"), offered("hornet"));
    assert!(
        !hornet.is_empty() && hornet.iter().all(|o| !o),
        "{hornet:?}"
    );
    assert!(!wasp.is_empty() && wasp.iter().all(|o| *o), "{wasp:?}");
    up.stop_ok();
}

/// Issue 31, finding 3, on Claude Code itself: the stub has the model call the pack's MCP tool,
/// which Claude Code names `mcp__hive__write_note` and reports as kind `other`. `read_only` used
/// to admit it; now `wasp` (read-only) has it refused and never called, while `bee` (read-only,
/// the tool named in `allow`) has it admitted and called.
#[test]
fn claude_code_mcp_tools_pass_read_only_only_when_named() {
    let home = open_home();
    let provider = Provider::scripted(Script {
        tools: vec![(
            "mcp__hive__write_note".into(),
            json!({"text": "forty grains"}),
        )],
        answer: "Noted, says the stub.".into(),
        ..Script::default()
    });
    let hive = format!(
        "mcp_servers:\n  - name: hive\n    type: http\n    url: {}/mcp\n",
        provider.url
    );
    let wasp = format!("{hive}x-tool-policy:\n  read_only: true\n");
    let bee = format!(
        "{hive}x-tool-policy:\n  read_only: true\n  allow: [Read, \"mcp__hive__write_note\"]\n"
    );
    let Some((mut up, _)) = claude_up(
        home.path(),
        &provider,
        &[("wasp", &wasp), ("bee", &bee)],
        &["--permission", "allow-once"],
    ) else {
        return;
    };
    let called = |provider: &Provider| {
        provider
            .requests()
            .iter()
            .filter(|s| s.path == "/mcp" && s.body["method"] == "tools/call")
            .count()
    };
    let id = up.post("general", "@wasp please write the note", &[]);
    let refused = note(&mut up, "permission", "wasp", |v| {
        v["tool"] == "mcp__hive__write_note"
    });
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["decided_by"], "tool-policy", "{refused}");
    assert_eq!(refused["kind"], "other", "{refused}");
    assert!(
        refused["reason"].as_str().unwrap().contains("read-only"),
        "{refused}"
    );
    note(&mut up, "turn", "wasp", |v| v["id"] == id.as_str());
    assert_eq!(called(&provider), 0, "the refused MCP tool was called");

    let id = up.post("general", "@bee please write the note", &[]);
    let admitted = note(&mut up, "permission", "bee", |v| {
        v["tool"] == "mcp__hive__write_note"
    });
    assert_eq!(admitted["allowed"], true, "{admitted}");
    assert_eq!(admitted["decided_by"], "permission", "{admitted}");
    note(&mut up, "reply", "bee", |v| v["to"] == id.as_str());
    assert_eq!(called(&provider), 1, "the admitted MCP tool was not called");
    up.stop_ok();
}

/// With no policy, `--permission allow-once` lets Claude Code's `Write` run in the persona's
/// workspace. Then a turn the provider never answers is cancelled at the turn deadline
/// (`session/cancel`), and the persona answers the next message.
#[test]
fn claude_code_allowed_tools_run_in_the_workspace_and_a_stalled_turn_is_cancelled() {
    let home = open_home();
    let ws = home.path().join("ws/com.example.claude-tools/bee");
    let file = ws.join("note.txt");
    let answer = "Wrote it, says the stub.";
    let provider = Provider::scripted(write_script(&file, answer));
    let Some((mut up, _)) = claude_up(
        home.path(),
        &provider,
        &[("bee", "")],
        &["--permission", "allow-once", "--turn-timeout", "20"],
    ) else {
        return;
    };
    let id = up.post("general", "@bee please write the note", &[]);
    note(&mut up, "reply", "bee", |v| v["to"] == id.as_str());
    let allowed = note(&mut up, "permission", "bee", |v| v["tool"] == "Write");
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert_eq!(allowed["decided_by"], "permission", "{allowed}");
    note(&mut up, "tool_call", "bee", |v| {
        v["tool"] == "Write" && v["status"] == "completed"
    });
    assert_eq!(
        std::fs::read_to_string(&file).expect("the allowed Write ran in the workspace"),
        "forty grains\n"
    );

    let stalled = up.post("general", "@bee !stall", &[]);
    let failed = note(&mut up, "error", "bee", |v| v["id"] == stalled.as_str());
    assert!(
        failed["reason"].as_str().unwrap().contains("cancelled"),
        "{failed}"
    );
    let next = up.post("general", "@bee are you still there?", &[]);
    note(&mut up, "reply", "bee", |v| v["to"] == next.as_str());
    let history = up.history("general");
    let replies: Vec<&Value> = history.iter().filter(|e| e["content"] == answer).collect();
    assert_eq!(replies.len(), 2, "{history:#?}");
    up.stop_ok();
}

/// Gemini CLI in its ACP mode, through the `--agent gemini` preset: the Gemini API key from the
/// environment (no `authenticate` needed), `GOOGLE_GEMINI_BASE_URL` on the stub, the persona's
/// model selected with `session/set_model` and in the request path.
#[test]
fn gemini_answers_a_mention_on_its_real_agent() {
    let Some(bin) = installed("gemini", None) else {
        return;
    };
    let answer = "Twenty grains of pollen, says the stub.";
    let provider = Provider::start(answer);
    let home = open_home();
    let root = home.path().join("pack");
    pack(&root, "gemini", "gemini-2.5-pro", &provider);
    grant(
        home.path(),
        "com.example.real-agents",
        &provider,
        &["GEMINI_API_KEY"],
        "",
    );
    let ws = home.path().join("ws");
    let path = path_with(bin.parent().unwrap());
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--agent",
            "gemini",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("GEMINI_API_KEY", "stub-key"),
            ("GOOGLE_GEMINI_BASE_URL", provider.url.as_str()),
        ],
    );
    up.wait_for(|l| l.starts_with("persona bee ready"));
    mention_is_answered(&mut up, answer);
    let turn = provider.wait_for("a streamGenerateContent request", |s| {
        s.path.contains(":streamGenerateContent")
    });
    assert!(
        turn.path.starts_with("/v1beta/models/gemini-2.5-pro:"),
        "{}",
        turn.path
    );
    let text = asked(&turn.body);
    assert!(text.contains("You are Bee, who answers in one sentence."));
    assert!(
        text.contains("pollen-count"),
        "the skill list is not in the prompt"
    );
    up.stop_ok();
}

/// Codex with a persona whose tool policy is read-only: Codex's own approval preset, set to
/// `auto` in its config, is switched to `read-only` for that persona's session. Codex reports its
/// usage (`usage_update`): a `usage` event, and it feeds the persona's token budget, so a second
/// turn over `tokens_per_day` is `limited`.
#[test]
fn codex_read_only_persona_gets_its_read_only_mode_and_usage_feeds_the_budget() {
    let Some(bin) = installed("codex-acp", None) else {
        return;
    };
    let answer = "Only looking, says the stub.";
    let provider = Provider::start(answer);
    let home = open_home();
    let root = home.path().join("pack");
    let bee = "---\nname: bee\ndisplay_name: Bee\ndescription: looks\nruntime: codex\n\
        model: gpt-5.4-mini\nsubscribe: [\"general\"]\nx-tool-policy:\n  read_only: true\n---\n\
        You are Bee.\n";
    write_pack(&root, "com.example.codex-ro", &[("bee", bee)], &[]);
    let codex = codex_home(home.path(), &provider);
    let config = std::fs::read_to_string(codex.join("config.toml")).unwrap();
    std::fs::write(
        codex.join("config.toml"),
        format!("approval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n{config}"),
    )
    .unwrap();
    let path = path_with(bin.parent().unwrap());
    let ws = home.path().join("ws");
    grant_codex(
        home.path(),
        "com.example.codex-ro",
        &provider,
        &codex,
        "[\"com.example.codex-ro\".bee]\nlimits = { tokens_per_day = 10 }",
    );
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--agent",
            "codex",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("CODEX_HOME", codex.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-stub"),
        ],
    );
    let id = up.post("general", "@bee what do you see?", &[]);
    note(&mut up, "reply", "bee", |v| v["to"] == id.as_str());
    let stderr = up.stderr();
    assert!(
        stderr.contains("read-only mode selected"),
        "{stderr}\n{}",
        up.seen.join("\n")
    );
    // The stub's response counts 15 tokens.
    let usage = note(&mut up, "usage", "bee", |_| true);
    assert_eq!(usage["used"], 15, "{usage}");
    let second = up.post("general", "@bee and now?", &[]);
    let limited = note(&mut up, "limited", "bee", |v| v["id"] == second.as_str());
    assert_eq!(limited["limit"], "tokens_per_day", "{limited}");
    assert_eq!(
        (limited["allowed"].as_u64(), limited["used"].as_u64()),
        (Some(10), Some(15))
    );
    up.stop_ok();
}

/// Codex's real tools under the tool policy: the stub answers with a plan (`update_plan`), then an
/// `exec_command` that asks to leave Codex's sandbox (`require_escalated`), so Codex asks
/// permission. `wasp` (`deny: [kind:execute]`) is refused by the tool policy although
/// `--permission allow-once`, and the command does not run (Codex names no tool, so the policy
/// goes by the ACP kind); `bee` (no policy) is allowed and the command runs in its workspace.
#[test]
fn codex_permission_requests_follow_the_tool_policy() {
    let Some(bin) = installed("codex-acp", None) else {
        return;
    };
    let provider = Provider::scripted(Script {
        tools: vec![
            (
                "update_plan".into(),
                json!({"plan": [{"step": "Leave a mark", "status": "in_progress"}]}),
            ),
            (
                "exec_command".into(),
                json!({"cmd": "echo ran > codex-ran.txt", "sandbox_permissions": "require_escalated",
                       "justification": "Leave a mark in the workspace?"}),
            ),
        ],
        answer: "Done, says the stub.".into(),
        ..Script::default()
    });
    let home = open_home();
    let root = home.path().join("pack");
    let persona = |name: &str, extra: &str| {
        format!(
            "---\nname: {name}\ndisplay_name: {name}\ndescription: runs things\nruntime: codex\n\
             model: gpt-5.4-mini\nsubscribe: [\"general\"]\n{extra}---\nYou are {name}.\n"
        )
    };
    let wasp = persona("wasp", "x-tool-policy:\n  deny: [\"kind:execute\"]\n");
    let bee = persona("bee", "");
    write_pack(
        &root,
        "com.example.codex-tools",
        &[("wasp", &wasp), ("bee", &bee)],
        &[],
    );
    let codex = codex_home(home.path(), &provider);
    grant_codex(
        home.path(),
        "com.example.codex-tools",
        &provider,
        &codex,
        "",
    );
    let path = path_with(bin.parent().unwrap());
    let ws = home.path().join("ws");
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--agent",
            "codex",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("CODEX_HOME", codex.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-stub"),
        ],
    );
    for (name, allowed) in [("wasp", false), ("bee", true)] {
        let id = up.post("general", &format!("@{name} leave a mark"), &[]);
        let asked = note(&mut up, "permission", name, |_| true);
        assert_eq!(asked["allowed"], allowed, "{asked}");
        let by = if allowed { "permission" } else { "tool-policy" };
        assert_eq!(asked["decided_by"], by, "{asked}");
        assert_eq!(asked["kind"], "execute", "{asked}");
        // Refused, Codex ends the turn (cancelled, no text); allowed, it goes on to the answer.
        let ended = if allowed { "reply" } else { "turn" };
        note(&mut up, ended, name, |v| {
            v["to"] == id.as_str() || v["id"] == id.as_str()
        });
        let ran = ws
            .join("com.example.codex-tools")
            .join(name)
            .join("codex-ran.txt");
        assert_eq!(ran.exists(), allowed, "{name}: did the command run?");
    }
    note(&mut up, "plan", "bee", |v| v["entries"] == 1);
    note(&mut up, "tool_call", "bee", |v| v["kind"] == "execute");
    up.stop_ok();
}

/// Gemini CLI's real `write_file` under the tool policy: the stub asks for it, Gemini asks
/// permission; `wasp` (`deny: [kind:edit]`) is refused although `--permission allow-once` and
/// nothing is written, `bee` (no policy) is allowed and the file is written in its workspace.
#[test]
fn gemini_permission_requests_follow_the_tool_policy() {
    let Some(bin) = installed("gemini", None) else {
        return;
    };
    let home = open_home();
    let ws = home.path().join("ws");
    let answer = "Noted, says the stub.";
    let provider = Provider::scripted(Script {
        tools: vec![(
            "write_file".into(),
            json!({"file_path": "gemini-note.txt", "content": "twenty grains\n"}),
        )],
        answer: answer.into(),
        ..Script::default()
    });
    let root = home.path().join("pack");
    let persona = |name: &str, extra: &str| {
        format!(
            "---\nname: {name}\ndisplay_name: {name}\ndescription: writes\nruntime: gemini\n\
             model: gemini-2.5-pro\nsubscribe: [\"general\"]\n{extra}---\nYou are {name}.\n"
        )
    };
    let wasp = persona("wasp", "x-tool-policy:\n  deny: [\"kind:edit\"]\n");
    let bee = persona("bee", "");
    write_pack(
        &root,
        "com.example.gemini-tools",
        &[("wasp", &wasp), ("bee", &bee)],
        &[],
    );
    grant(
        home.path(),
        "com.example.gemini-tools",
        &provider,
        &["GEMINI_API_KEY"],
        "",
    );
    let path = path_with(bin.parent().unwrap());
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--agent",
            "gemini",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("GEMINI_API_KEY", "stub-key"),
            ("GOOGLE_GEMINI_BASE_URL", provider.url.as_str()),
        ],
    );
    for (name, allowed) in [("wasp", false), ("bee", true)] {
        let id = up.post("general", &format!("@{name} write the note"), &[]);
        let asked = note(&mut up, "permission", name, |_| true);
        assert_eq!(asked["allowed"], allowed, "{asked}");
        let by = if allowed { "permission" } else { "tool-policy" };
        assert_eq!(asked["decided_by"], by, "{asked}");
        note(&mut up, "reply", name, |v| v["to"] == id.as_str());
        let file = ws
            .join("com.example.gemini-tools")
            .join(name)
            .join("gemini-note.txt");
        assert_eq!(file.exists(), allowed, "{name}: was the file written?");
    }
    up.stop_ok();
}

/// Claude Code runs `Task` (a subagent with tools of its own) without asking permission, so the
/// tool policy reaches it only through `disallowedTools`: a read-only persona is not offered
/// `Task`, the shell or the editors (it is offered its readers), and `deny:
/// [run_shell_command]`, Gemini's name, keeps Claude Code's `Bash` from the model.
#[test]
fn claude_code_is_not_offered_what_the_policy_denies_in_any_runtime_s_names() {
    let home = open_home();
    let provider = Provider::start("Looked, says the stub.");
    let Some((mut up, _)) = claude_up(
        home.path(),
        &provider,
        &[
            ("ro", "x-tool-policy:\n  read_only: true\n"),
            ("gem", "x-tool-policy:\n  deny: [run_shell_command]\n"),
        ],
        &[],
    ) else {
        return;
    };
    for name in ["ro", "gem"] {
        let id = up.post("general", &format!("@{name} look around"), &[]);
        note(&mut up, "reply", name, |v| v["to"] == id.as_str());
    }
    let offered = |who: &str| -> Vec<String> {
        let asked = provider.requests().into_iter().find(|s| {
            s.body["tools"].is_array() && s.body.to_string().contains(&format!("You are {who}."))
        });
        let asked = asked.unwrap_or_else(|| panic!("no request with tools for {who}"));
        asked.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect()
    };
    let (ro, gem) = (offered("ro"), offered("gem"));
    let has = |list: &[String], name: &str| list.iter().any(|n| n == name);
    for name in [
        "Task",
        "Bash",
        "Write",
        "Edit",
        "NotebookEdit",
        "ExitPlanMode",
    ] {
        assert!(
            !has(&ro, name),
            "{name} offered to a read-only persona: {ro:?}"
        );
    }
    for name in ["Read", "Grep", "Glob"] {
        assert!(
            has(&ro, name),
            "{name} not offered to a read-only persona: {ro:?}"
        );
    }
    assert!(!has(&gem, "Bash"), "{gem:?}");
    assert!(has(&gem, "Write") && has(&gem, "Task"), "{gem:?}");
    up.stop_ok();
}

/// Asserts that no key of the store, the operator's notes nor `provider_key` reached the model (the
/// requests it was sent, tool results included) or the channel; the model's requests, as text.
fn nothing_secret_reached(
    up: &mut Up,
    provider: &Provider,
    keys: &Path,
    provider_key: &str,
) -> String {
    let mut secrets: Vec<String> = vec![provider_key.into(), "the vault code is 7413".into()];
    for file in ["operator.key", "relay.key"] {
        secrets.push(
            std::fs::read_to_string(keys.join(file))
                .unwrap()
                .trim()
                .to_string(),
        );
    }
    let seen: String = provider
        .requests()
        .iter()
        .map(|s| s.body.to_string())
        .collect();
    for secret in &secrets {
        assert!(
            !seen.contains(secret.as_str()),
            "the model was shown {secret}"
        );
    }
    for e in up.history("general") {
        let content = e["content"].as_str().unwrap_or_default();
        assert!(
            !secrets.iter().any(|s| content.contains(s.as_str())),
            "published: {content}"
        );
    }
    seen
}

/// Claude Code, steered by its model (the stub) at the key store, the operator's files and its
/// own environment with Read, Grep and Bash, all allowed by `--permission allow-once`: every tool
/// runs confined and fails, and nothing secret reaches the model (the tool results sent back) or
/// the channel. Its own workspace stays usable.
#[test]
fn claude_code_steered_at_the_key_store_reads_nothing_and_tells_nothing() {
    let home = open_home();
    let data = apiary_e2e::data_dir(home.path());
    let notes = home.path().join("operator-notes.txt");
    std::fs::write(&notes, "operator notes: the vault code is 7413").unwrap();
    let keys = data.join("keys");
    let script = Script {
        tools: vec![
            (
                "Read".into(),
                json!({"file_path": keys.join("operator.key")}),
            ),
            (
                "Grep".into(),
                json!({"pattern": "[0-9a-f]{64}", "path": keys}),
            ),
            ("Read".into(), json!({"file_path": notes})),
            (
                "Bash".into(),
                json!({"command": format!(
                    "cat {k}/*.key {k}/*/*.key {n}; cat /proc/$PPID/environ; env; echo ok > mine.txt && cat mine.txt",
                    k = keys.display(), n = notes.display()
                ), "description": "look around"}),
            ),
        ],
        answer: "Nothing to report, says the stub.".into(),
        ..Script::default()
    };
    let provider = Provider::scripted(script);
    let Some((mut up, ws)) = claude_up(
        home.path(),
        &provider,
        &[("eve", "")],
        &["--permission", "allow-once"],
    ) else {
        return;
    };
    let id = up.post("general", "@eve look for keys", &[]);
    note(&mut up, "reply", "eve", |v| v["to"] == id.as_str());
    let seen = nothing_secret_reached(&mut up, &provider, &keys, CLAUDE_KEY);
    // The tools ran (their results went back to the model), refused by the kernel; the shell still
    // worked in the workspace, and the key it saw is the placeholder.
    assert!(
        seen.contains("Permission denied") || seen.contains("EACCES"),
        "{seen}"
    );
    assert!(
        seen.contains("apiary-placeholder-anthropic-api-key"),
        "env not shown: {seen}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("eve/mine.txt")).unwrap(),
        "ok\n"
    );
    up.stop_ok();
}

/// Gemini CLI, steered by its model (the stub) to run a shell command that reads the key store, the
/// operator's files, apiary's environment and its own: the command runs (allowed), confined, and
/// neither the model nor the channel sees a secret. The Gemini key it holds is the placeholder.
#[test]
fn gemini_steered_at_the_key_store_reads_nothing_and_tells_nothing() {
    let Some(bin) = installed("gemini", None) else {
        return;
    };
    let home = open_home();
    let ws = home.path().join("ws");
    let keys = apiary_e2e::data_dir(home.path()).join("keys");
    let notes = home.path().join("operator-notes.txt");
    std::fs::write(&notes, "operator notes: the vault code is 7413").unwrap();
    let command = format!(
        "cat {k}/*.key {k}/*/*.key {n}; cat /proc/$PPID/environ; env; echo ok > mine.txt",
        k = keys.display(),
        n = notes.display()
    );
    let provider = Provider::scripted(Script {
        tools: vec![(
            "run_shell_command".into(),
            json!({"command": command, "description": "look around"}),
        )],
        answer: "Nothing to report, says the stub.".into(),
        ..Script::default()
    });
    let root = home.path().join("pack");
    pack(&root, "gemini", "gemini-2.5-pro", &provider);
    grant(
        home.path(),
        "com.example.real-agents",
        &provider,
        &["GEMINI_API_KEY"],
        "",
    );
    let path = path_with(bin.parent().unwrap());
    let gemini_key = "AIzaOperatorRealKey0123456789";
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--agent",
            "gemini",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("GEMINI_API_KEY", gemini_key),
            ("GOOGLE_GEMINI_BASE_URL", provider.url.as_str()),
        ],
    );
    let id = up.post("general", "@bee look for keys", &[]);
    note(&mut up, "reply", "bee", |v| v["to"] == id.as_str());
    let seen = nothing_secret_reached(&mut up, &provider, &keys, gemini_key);
    // The command ran (its output went back to the model): refused by the kernel where it
    // reached out, working in its workspace.
    assert!(seen.contains("Permission denied"), "{seen}");
    assert!(
        seen.contains("apiary-placeholder-gemini-api-key"),
        "env not shown: {seen}"
    );
    let mine = ws.join("com.example.real-agents/bee/mine.txt");
    assert_eq!(std::fs::read_to_string(mine).unwrap(), "ok\n");
    up.stop_ok();
}

/// Issue 34 on Claude Code itself: the stub has the model call apiary's own tools, which Claude
/// Code reaches over HTTP MCP through its confinement's egress route. `list_personas` names bob,
/// `read_thread` returns the message being answered, and `post` hands bob a task: bob, woken by
/// the post, answers in its thread. apiary's tools need no `--permission`: each request is
/// answered `apiary-tools`.
#[test]
fn claude_code_uses_apiary_s_tools_and_hands_work_to_another_persona() {
    let home = open_home();
    let provider = Provider::scripted(Script {
        tools: vec![
            ("mcp__apiary__list_personas".into(), json!({})),
            ("mcp__apiary__read_thread".into(), json!({"limit": 5})),
            (
                "mcp__apiary__post".into(),
                json!({"text": "@bob please count the frames"}),
            ),
        ],
        answer: "Handed over, says the stub.".into(),
        ..Script::default()
    });
    let Some((mut up, _)) = claude_up(home.path(), &provider, &[("ada", ""), ("bob", "")], &[])
    else {
        return;
    };
    let ask = up.post("general", "@ada get this counted", &[]);
    for tool in ["list_personas", "read_thread", "post"] {
        let used = note(&mut up, "apiary_tool", "ada", |v| v["tool"] == tool);
        assert_eq!(used["ok"], true, "{used}");
    }
    let asked = note(&mut up, "permission", "ada", |v| {
        v["tool"] == "mcp__apiary__post"
    });
    assert_eq!(asked["allowed"], true, "{asked}");
    assert_eq!(asked["decided_by"], "apiary-tools", "{asked}");
    let posted = note(&mut up, "posted", "ada", |_| true);
    let post_id = posted["id"].as_str().unwrap().to_string();
    note(&mut up, "reply", "ada", |v| v["to"] == ask.as_str());
    // Bob is woken by Ada's post and answers in its thread.
    note(&mut up, "reply", "bob", |v| v["to"] == post_id.as_str());
    // What the tools answered reached the model: bob listed, the asking message read.
    let results: String = provider
        .requests()
        .iter()
        .filter(|s| s.path.split('?').next() == Some("/v1/messages"))
        .map(|s| s.body["messages"].to_string())
        .collect();
    assert!(
        results.contains("@bob"),
        "list_personas' answer did not reach the model"
    );
    assert!(
        results.contains("get this counted"),
        "read_thread's answer did not reach the model"
    );
    up.stop_ok();
}

/// Issue 34 on Codex: the stub has the model call apiary's `list_personas` and `post` (as Codex
/// names them) over HTTP MCP through Codex's confinement; `--permission allow-once` answers any
/// request Codex makes for them (it names no tool). Bob, woken by the post, answers in its
/// thread.
#[test]
fn codex_uses_apiary_s_tools_and_hands_work_to_another_persona() {
    let Some(bin) = installed("codex-acp", None) else {
        return;
    };
    let provider = Provider::scripted(Script {
        tools: vec![
            ("~list_personas".into(), json!({})),
            (
                "~post".into(),
                json!({"text": "@bob please count the frames"}),
            ),
        ],
        answer: "Handed over, says the stub.".into(),
        ..Script::default()
    });
    let home = open_home();
    let root = home.path().join("pack");
    let files: Vec<(String, String)> = ["ada", "bob"]
        .iter()
        .map(|name| {
            let text = format!(
                "---\nname: {name}\ndisplay_name: {name}\ndescription: a team member\nruntime: codex\n\
                 model: gpt-5.4-mini\nsubscribe: [\"general\"]\n---\nYou are {name}.\n"
            );
            (name.to_string(), text)
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_pack(&root, "com.example.real-agents", &refs, &[]);
    let codex = codex_home(home.path(), &provider);
    grant_codex(
        home.path(),
        "com.example.real-agents",
        &provider,
        &codex,
        "",
    );
    let ws = home.path().join("ws");
    let path = path_with(bin.parent().unwrap());
    let mut up = Up::start(
        home.path(),
        &[&root],
        &[
            "--json",
            "--agent",
            "codex",
            "--permission",
            "allow-once",
            "--workspace-root",
            ws.to_str().unwrap(),
        ],
        &[
            ("PATH", path.as_str()),
            ("CODEX_HOME", codex.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-stub"),
        ],
    );
    let ask = up.post("general", "@ada get this counted", &[]);
    let listed = note(&mut up, "apiary_tool", "ada", |v| {
        v["tool"] == "list_personas"
    });
    assert_eq!(listed["ok"], true, "{listed}");
    let posted = note(&mut up, "posted", "ada", |_| true);
    let post_id = posted["id"].as_str().unwrap().to_string();
    note(&mut up, "reply", "ada", |v| v["to"] == ask.as_str());
    note(&mut up, "reply", "bob", |v| v["to"] == post_id.as_str());
    up.stop_ok();
}
