//! `${…}` variables in MCP server entries that only a plugin host defines.
//!
//! apiary fills `${VAR}` and `${VAR:-default}` from the operator's environment (for variables the
//! operator allowed the pack to read). Claude Code and Agent Plugins hosts also define variables
//! of their own (the plugin's folder, its data folder, user settings): apiary has no value for
//! them, so a server using one does not start as written. Converters report them as lost.

/// Host-only variables, as `(what to look for, how to name it)`.
const HOST_ONLY: &[(&str, &str)] = &[
    ("${CLAUDE_PLUGIN_ROOT}", "${CLAUDE_PLUGIN_ROOT}"),
    ("${CLAUDE_PLUGIN_DATA}", "${CLAUDE_PLUGIN_DATA}"),
    ("${PLUGIN_ROOT}", "${PLUGIN_ROOT}"),
    ("${PLUGIN_DATA}", "${PLUGIN_DATA}"),
    ("${user_config.", "${user_config.*}"),
];

/// The host-only variables `text` (a server entry as JSON text) uses, each named once.
pub fn host_only(text: &str) -> Vec<&'static str> {
    HOST_ONLY
        .iter()
        .filter(|(needle, _)| text.contains(needle))
        .map(|(_, name)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_host_variables_and_leaves_environment_ones() {
        let text = r#"{"command":"${CLAUDE_PLUGIN_ROOT}/bin/x","env":{"A":"${TOKEN:-none}","B":"${user_config.key}"}}"#;
        assert_eq!(
            host_only(text),
            vec!["${CLAUDE_PLUGIN_ROOT}", "${user_config.*}"]
        );
        assert!(host_only(r#"{"env":{"A":"${HOME}","B":"${X:-y}"}}"#).is_empty());
    }
}
