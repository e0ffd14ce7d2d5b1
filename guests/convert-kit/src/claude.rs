//! The Claude Code plugin layout: where a plugin keeps its manifest, its components and its
//! marketplace, plus the manifests of the cousins converter-claude also reads (Codex, Cursor,
//! Gemini). converter-claude reads and writes this layout and the host detects it and checks what
//! the converter wrote, both from here, so they cannot disagree about a path.
//!
//! Paths are relative to the plugin root, `/`-separated.

/// The manifest directory, the one hidden directory a plugin has.
pub const MANIFEST_DIR: &str = ".claude-plugin";
/// The plugin manifest (`name`, metadata, component paths). Optional: a plugin without one is
/// read from its default component directories.
pub const MANIFEST: &str = ".claude-plugin/plugin.json";
/// A marketplace: a catalogue of plugins (`name`, `plugins` with a `source` each).
pub const MARKETPLACE: &str = ".claude-plugin/marketplace.json";

/// Subagents, one markdown file with frontmatter each (subdirectories allowed).
pub const AGENTS_DIR: &str = "agents";
/// Skills, one directory each holding a `SKILL.md`.
pub const SKILLS_DIR: &str = "skills";
/// Slash commands, one markdown file each.
pub const COMMANDS_DIR: &str = "commands";
/// The hooks directory: [`HOOKS_CONFIG`] and the scripts it runs.
pub const HOOKS_DIR: &str = "hooks";
/// Hooks: a map of Claude Code events to commands.
pub const HOOKS_CONFIG: &str = "hooks/hooks.json";
/// MCP servers (`mcpServers`).
pub const MCP_CONFIG: &str = ".mcp.json";
/// LSP servers.
pub const LSP_CONFIG: &str = ".lsp.json";
/// Output styles.
pub const OUTPUT_STYLES_DIR: &str = "output-styles";
/// Themes.
pub const THEMES_DIR: &str = "themes";
/// Monitors.
pub const MONITORS_DIR: &str = "monitors";
/// Settings the plugin ships.
pub const SETTINGS: &str = "settings.json";
/// Executables the plugin ships.
pub const BIN_DIR: &str = "bin";
/// Scripts (what hooks and MCP servers commonly run).
pub const SCRIPTS_DIR: &str = "scripts";

/// Every top-level entry of the layout. Claude Code skips other entries; documentation and
/// licences ([`crate::is_documentation`]) may sit beside them in any format.
pub const TOP_LEVEL: &[&str] = &[
    MANIFEST_DIR,
    AGENTS_DIR,
    SKILLS_DIR,
    COMMANDS_DIR,
    HOOKS_DIR,
    MCP_CONFIG,
    LSP_CONFIG,
    OUTPUT_STYLES_DIR,
    THEMES_DIR,
    MONITORS_DIR,
    SETTINGS,
    BIN_DIR,
    SCRIPTS_DIR,
];

/// The [`MANIFEST`] fields that point at components (a path, a list of paths, or an inline
/// definition), in addition to or instead of the default locations above.
pub const COMPONENT_FIELDS: &[&str] = &[
    "agents",
    "skills",
    "commands",
    "hooks",
    "mcpServers",
    "outputStyles",
    "lspServers",
    "themes",
    "monitors",
];

/// Where a marketplace may be, in the order they are looked for: Claude's, Copilot's, and Agent
/// Plugins' (also Codex's). All three have the shape of [`MARKETPLACE`].
pub const MARKETPLACES: &[&str] = &[
    MARKETPLACE,
    ".github/plugin/marketplace.json",
    ".agents/plugins/marketplace.json",
];

/// A Codex plugin's manifest (otherwise a Claude layout).
pub const CODEX_MANIFEST: &str = ".codex-plugin/plugin.json";
/// A Cursor plugin's manifest (otherwise a Claude layout).
pub const CURSOR_MANIFEST: &str = ".cursor-plugin/plugin.json";
/// A Gemini CLI extension's manifest, at the root.
pub const GEMINI_MANIFEST: &str = "gemini-extension.json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_sit_in_their_directories() {
        for file in [MANIFEST, MARKETPLACE] {
            assert!(file.starts_with(&format!("{MANIFEST_DIR}/")), "{file}");
        }
        assert!(HOOKS_CONFIG.starts_with(&format!("{HOOKS_DIR}/")));
        assert_eq!(MARKETPLACES[0], MARKETPLACE);
        // Top-level names only, each once.
        let mut names = TOP_LEVEL.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOP_LEVEL.len());
        assert!(TOP_LEVEL.iter().all(|n| !n.contains('/')));
    }
}
