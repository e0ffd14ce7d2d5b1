//! An agent's environment, built from nothing: what any program needs to run (`PATH`, a `HOME` and
//! `TMPDIR` of its own, the locale), what its runtime reads (the persona's model variables, the
//! bundled agent's own settings), apiary's variables, the proxy and the provider gateway, and
//! exactly the variables the operator grants (`agent_env`). A runtime's own provider key arrives as
//! a placeholder when the gateway stands in between.

use std::collections::BTreeMap;
use std::path::Path;

use apiary_core::runtime::Runtime;

use crate::resolve::ResolvedPersona;

/// The operator's environment, read once.
#[derive(Debug, Clone, Default)]
pub struct OperatorEnv(BTreeMap<String, String>);

impl OperatorEnv {
    /// apiary's own process environment (variables that are not UTF-8 are left out).
    pub fn of_process() -> OperatorEnv {
        OperatorEnv(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        )
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> OperatorEnv {
        OperatorEnv(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn prefixed<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a String, &'a String)> {
        self.0
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
    }
}

/// Passed from the operator's environment when set: the locale and terminal, nothing secret.
const PASSED: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
];
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The variables naming an HTTP proxy, in the spellings programs read.
const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

pub struct Inputs<'a> {
    pub runtime: &'a Runtime,
    pub persona: &'a ResolvedPersona,
    pub pack_id: &'a str,
    pub cwd: &'a Path,
    pub home: &'a Path,
    pub tmp: &'a Path,
    /// The agent's user name, when `--agent-user` set one.
    pub user: Option<&'a str>,
    pub operator_env: &'a OperatorEnv,
    /// The agent's loopback port of the provider gateway (`None`: no gateway).
    pub gateway: Option<u16>,
    /// The agent's loopback port of the egress proxy (`None`: the host's network).
    pub proxy: Option<u16>,
}

/// The environment and what goes with it.
#[derive(Debug, Default)]
pub struct Built {
    pub vars: Vec<(String, String)>,
    /// Values that must never be published (granted values and real keys).
    pub secrets: Vec<String>,
    /// Placeholder → real key, for the gateway.
    pub placeholders: Vec<(String, String)>,
    /// The provider's base URL the gateway sends to (`None`: no gateway).
    pub upstream: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    #[error(
        "`{var}` is granted to the agents of {pack} (`agent_env` in the overrides file) but is not set in apiary's environment"
    )]
    Unset { var: String, pack: String },
    #[error(
        "the {runtime} runtime needs its provider key and none is granted: set {var} in apiary's environment and add `agent_env = [\"{var}\"]` under [\"{pack}\"] in the overrides file (any of {all} will do)"
    )]
    NoKey {
        runtime: String,
        var: String,
        all: String,
        pack: String,
    },
}

pub fn build(i: &Inputs<'_>) -> Result<Built, EnvError> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let op = i.operator_env;
    env.insert("PATH".into(), op.get("PATH").unwrap_or(DEFAULT_PATH).into());
    env.insert("HOME".into(), i.home.display().to_string());
    env.insert("TMPDIR".into(), i.tmp.display().to_string());
    if let Some(user) = i.user.or(op.get("USER")) {
        env.insert("USER".into(), user.into());
        env.insert("LOGNAME".into(), user.into());
    }
    for var in PASSED {
        if let Some(v) = op.get(var) {
            env.insert((*var).into(), v.into());
        }
    }
    if let Some(prefix) = i.runtime.own_prefix {
        env.extend(op.prefixed(prefix).map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(i.persona.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.insert("APIARY_PERSONA".into(), i.persona.identity.name.clone());
    env.insert("APIARY_PACK".into(), i.pack_id.into());
    env.insert("AGENT_CWD".into(), i.cwd.display().to_string());
    if let Some(port) = i.proxy {
        let url = format!("http://127.0.0.1:{port}");
        for var in PROXY_VARS {
            env.insert((*var).into(), url.clone());
        }
        env.insert("NO_PROXY".into(), "localhost,127.0.0.1,::1".into());
        env.insert("no_proxy".into(), "localhost,127.0.0.1,::1".into());
    }
    let mut built = Built::default();
    grant(i, &mut env, &mut built)?;
    provider(i, &mut env, &mut built)?;
    built.vars = env.into_iter().collect();
    Ok(built)
}

/// The operator's `agent_env`: each variable as it is, but a provider key as a placeholder when the
/// gateway will put the real one in.
fn grant(
    i: &Inputs<'_>,
    env: &mut BTreeMap<String, String>,
    built: &mut Built,
) -> Result<(), EnvError> {
    let keys = i.runtime.provider.map(|p| p.key_vars).unwrap_or_default();
    for var in &i.persona.agent.env {
        let value = i.operator_env.get(var).ok_or_else(|| EnvError::Unset {
            var: var.clone(),
            pack: i.pack_id.into(),
        })?;
        if value.len() >= 8 {
            built.secrets.push(value.into());
        }
        if i.gateway.is_some() && keys.contains(&var.as_str()) {
            let placeholder = placeholder(var);
            built.placeholders.push((placeholder.clone(), value.into()));
            env.insert(var.clone(), placeholder);
        } else {
            env.insert(var.clone(), value.into());
        }
    }
    Ok(())
}

/// A runtime with a provider needs one of its keys granted; with the gateway, its base URL points
/// at the agent's own loopback and the operator's (or the default) is where the gateway sends.
fn provider(
    i: &Inputs<'_>,
    env: &mut BTreeMap<String, String>,
    built: &mut Built,
) -> Result<(), EnvError> {
    let Some(p) = i.runtime.provider else {
        return Ok(());
    };
    if !p
        .key_vars
        .iter()
        .any(|k| i.persona.agent.env.iter().any(|g| g == k))
    {
        return Err(EnvError::NoKey {
            runtime: i.runtime.name.into(),
            var: p.key_vars[0].into(),
            all: p.key_vars.join(", "),
            pack: i.pack_id.into(),
        });
    }
    let upstream = i.operator_env.get(p.base_url_var).unwrap_or(p.default_base);
    match i.gateway {
        Some(port) => {
            let path = apiary_egress::Upstream::parse(upstream)
                .map(|u| u.base_path)
                .unwrap_or_default();
            env.insert(
                p.base_url_var.into(),
                format!("http://127.0.0.1:{port}{path}"),
            );
            built.upstream = Some(upstream.into());
        }
        None => {
            if let Some(base) = i.operator_env.get(p.base_url_var) {
                env.insert(p.base_url_var.into(), base.into());
            }
        }
    }
    Ok(())
}

/// What the agent holds instead of `var`'s value: unique to this process and variable, worthless
/// to anyone who reads it.
fn placeholder(var: &str) -> String {
    use std::sync::OnceLock;
    static NONCE: OnceLock<String> = OnceLock::new();
    let nonce = NONCE.get_or_init(|| {
        let mut bytes = [0u8; 12];
        let _ = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    });
    format!(
        "apiary-placeholder-{}-{nonce}",
        var.to_ascii_lowercase().replace('_', "-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_core::resolve::grants::AgentGrants;

    fn persona(grants: &[&str]) -> ResolvedPersona {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (
                ".plugin/plugin.json",
                r#"{"id": "com.example.p", "name": "P", "version": "1.0.0", "personas": ["agents/bee.persona.md"]}"#,
            ),
            (
                "agents/bee.persona.md",
                "---\nname: bee\ndisplay_name: Bee\ndescription: d\nsubscribe: [general]\n---\nYou are Bee.\n",
            ),
        ];
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let loaded = apiary_core::pack::load(dir.path());
        let pack = loaded.pack.unwrap_or_else(|| panic!("{:?}", loaded.report));
        let overrides = apiary_core::resolve::overrides::Overrides::default();
        let mut p = apiary_core::resolve::resolve(&pack, &overrides, &|_| None)
            .personas
            .remove(0);
        p.agent = AgentGrants {
            env: grants.iter().map(|s| s.to_string()).collect(),
            ..AgentGrants::default()
        };
        p
    }

    fn inputs<'a>(
        runtime: &'a Runtime,
        persona: &'a ResolvedPersona,
        op: &'a OperatorEnv,
        gateway: bool,
    ) -> Inputs<'a> {
        Inputs {
            runtime,
            persona,
            pack_id: "com.example.p",
            cwd: Path::new("/ws/com.example.p/bee"),
            home: Path::new("/ws/.apiary-agents/com.example.p/bee/home"),
            tmp: Path::new("/ws/.apiary-agents/com.example.p/bee/tmp"),
            user: None,
            operator_env: op,
            gateway: gateway.then_some(4480),
            proxy: gateway.then_some(3128),
        }
    }

    fn get<'a>(b: &'a Built, k: &str) -> Option<&'a str> {
        b.vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn nothing_of_the_operator_passes_unless_granted() {
        let op = OperatorEnv::from_pairs([
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("GITHUB_TOKEN", "ghp_secret_value"),
            ("ANTHROPIC_API_KEY", "sk-ant-real-key"),
            ("LANG", "C.UTF-8"),
            ("APIARY_AGENT_SLOW_MS", "5"),
        ]);
        let rt = Runtime::find("apiary-agent").unwrap();
        let p = persona(&[]);
        let b = build(&inputs(&rt, &p, &op, true)).unwrap();
        assert_eq!(get(&b, "PATH"), Some("/usr/bin"));
        assert_eq!(
            get(&b, "HOME"),
            Some("/ws/.apiary-agents/com.example.p/bee/home")
        );
        assert_eq!(get(&b, "LANG"), Some("C.UTF-8"));
        assert_eq!(get(&b, "APIARY_AGENT_SLOW_MS"), Some("5"));
        assert_eq!(get(&b, "GITHUB_TOKEN"), None);
        assert_eq!(get(&b, "ANTHROPIC_API_KEY"), None);
        assert_eq!(get(&b, "HTTPS_PROXY"), Some("http://127.0.0.1:3128"));

        let p = persona(&["GITHUB_TOKEN"]);
        let b = build(&inputs(&rt, &p, &op, true)).unwrap();
        assert_eq!(get(&b, "GITHUB_TOKEN"), Some("ghp_secret_value"));
        assert_eq!(b.secrets, ["ghp_secret_value"]);
    }

    #[test]
    fn a_provider_key_is_a_placeholder_behind_the_gateway() {
        let op = OperatorEnv::from_pairs([
            ("ANTHROPIC_API_KEY", "sk-ant-real-key"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9999"),
        ]);
        let rt = Runtime::find("claude-code").unwrap();
        let p = persona(&["ANTHROPIC_API_KEY"]);
        let b = build(&inputs(&rt, &p, &op, true)).unwrap();
        let held = get(&b, "ANTHROPIC_API_KEY").unwrap();
        assert!(
            held.starts_with("apiary-placeholder-anthropic-api-key-"),
            "{held}"
        );
        assert!(!b.vars.iter().any(|(_, v)| v.contains("sk-ant-real-key")));
        assert_eq!(
            b.placeholders,
            [(held.to_string(), "sk-ant-real-key".to_string())]
        );
        assert_eq!(get(&b, "ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:4480"));
        assert_eq!(b.upstream.as_deref(), Some("http://127.0.0.1:9999"));
        // Without the gateway (an unconfined network) the agent holds the key itself.
        let b = build(&inputs(&rt, &p, &op, false)).unwrap();
        assert_eq!(get(&b, "ANTHROPIC_API_KEY"), Some("sk-ant-real-key"));
        assert_eq!(get(&b, "ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:9999"));
    }

    #[test]
    fn a_runtime_without_its_key_granted_is_refused_naming_the_setting() {
        let op = OperatorEnv::from_pairs([("OPENAI_API_KEY", "sk-real")]);
        let rt = Runtime::find("codex").unwrap();
        let p = persona(&[]);
        let e = build(&inputs(&rt, &p, &op, true)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(r#"agent_env = ["OPENAI_API_KEY"]"#), "{text}");
        assert!(text.contains(r#"["com.example.p"]"#), "{text}");
        let p = persona(&["CODEX_API_KEY"]);
        let e = build(&inputs(&rt, &p, &op, true)).unwrap_err();
        assert_eq!(
            e,
            EnvError::Unset {
                var: "CODEX_API_KEY".into(),
                pack: "com.example.p".into()
            }
        );
        // The upstream keeps its path, and the agent's base URL has it too.
        let p = persona(&["OPENAI_API_KEY"]);
        let b = build(&inputs(&rt, &p, &op, true)).unwrap();
        assert_eq!(get(&b, "OPENAI_BASE_URL"), Some("http://127.0.0.1:4480/v1"));
        assert_eq!(b.upstream.as_deref(), Some("https://api.openai.com/v1"));
    }
}
