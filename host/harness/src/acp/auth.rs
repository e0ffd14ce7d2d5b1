//! ACP authentication: the methods an agent lists in its `initialize` answer, the one apiary can use
//! unattended (a method of type `env_var` whose variables are all set for the agent), and the
//! refusal that names them when none can be used.

use serde_json::Value;

use super::stderr::visible;

/// At most this many methods are kept from an answer (agent output is hostile).
const MAX_METHODS: usize = 16;

/// One authentication method an agent offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethod {
    pub id: String,
    pub name: String,
    /// For methods of type `env_var`: the variables the agent reads; empty for the others
    /// (interactive logins, which a daemon cannot do).
    pub env_vars: Vec<String>,
}

/// The `authMethods` of a raw `initialize` answer.
pub fn methods(initialize: &Value) -> Vec<AuthMethod> {
    let Some(list) = initialize.get("authMethods").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .take(MAX_METHODS)
        .filter_map(|m| {
            let id = m.get("id")?.as_str()?;
            let env_vars = if m.get("type").and_then(Value::as_str) == Some("env_var") {
                m.get("vars")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .take(MAX_METHODS)
                    .filter_map(|v| v.get("name")?.as_str().map(|n| visible(n, 64)))
                    .collect()
            } else {
                Vec::new()
            };
            Some(AuthMethod {
                id: visible(id, 64),
                name: visible(m.get("name").and_then(Value::as_str).unwrap_or(id), 80),
                env_vars,
            })
        })
        .collect()
}

/// The first method whose variables are all set (non-empty) for the agent.
pub fn headless<'a>(
    methods: &'a [AuthMethod],
    is_set: &dyn Fn(&str) -> bool,
) -> Option<&'a AuthMethod> {
    methods
        .iter()
        .find(|m| !m.env_vars.is_empty() && m.env_vars.iter().all(|v| is_set(v)))
}

/// What the operator reads when the agent wants authentication apiary cannot give it.
pub fn refusal(methods: &[AuthMethod]) -> String {
    if methods.is_empty() {
        return "the agent requires authentication and lists no method".into();
    }
    let listed: Vec<String> = methods
        .iter()
        .map(|m| match m.env_vars.as_slice() {
            [] => format!("`{}` ({}, interactive)", m.id, m.name),
            vars => format!("`{}` (set {})", m.id, vars.join(" and ")),
        })
        .collect();
    let mut text = format!(
        "the agent requires authentication; it offers {}",
        listed.join(", ")
    );
    if methods.iter().all(|m| m.env_vars.is_empty()) {
        text.push_str(
            "; none can be done unattended: log in once as the user the agent runs as, then restart",
        );
    } else {
        text.push_str("; set the variables of one of them for `apiary up`");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn picks_an_env_method_whose_variables_are_set_and_names_all_when_none_is() {
        let init = json!({"authMethods": [
            {"id": "chatgpt", "name": "Login with ChatGPT"},
            {"type": "env_var", "id": "codex-api-key", "name": "Use CODEX_API_KEY", "vars": [{"name": "CODEX_API_KEY"}]},
            {"type": "env_var", "id": "openai-api-key", "name": "Use OPENAI_API_KEY", "vars": [{"name": "OPENAI_API_KEY"}]},
            {"name": "no id"}
        ]});
        let ms = methods(&init);
        assert_eq!(ms.len(), 3);
        let pick = headless(&ms, &|v| v == "OPENAI_API_KEY").unwrap();
        assert_eq!(pick.id, "openai-api-key");
        assert!(headless(&ms, &|_| false).is_none());
        let text = refusal(&ms);
        assert!(
            text.contains("`chatgpt` (Login with ChatGPT, interactive)"),
            "{text}"
        );
        assert!(
            text.contains("`codex-api-key` (set CODEX_API_KEY)"),
            "{text}"
        );
        let only_login = refusal(&ms[..1]);
        assert!(
            only_login.contains("none can be done unattended"),
            "{only_login}"
        );
        let hostile = methods(&json!({"authMethods": [{"id": "a\u{1b}[2J\nb", "name": "x"}]}));
        assert!(!hostile[0].id.chars().any(char::is_control));
    }
}
