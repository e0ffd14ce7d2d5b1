//! Conversation continuity: each persona's ACP session id per channel, kept in
//! `<data dir>/sessions/<namespace>/<persona>.json`, so a restarted agent (after a crash) or a
//! restarted `apiary up` resumes the channel's conversation (`session/load`, or `session/resume`)
//! when the agent offers it, instead of starting blank.
//!
//! The file is apiary's own, but it is read as untrusted all the same: capped, and an entry that
//! is not a plain id is ignored. Ids are kept per agent name: another agent never gets them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A larger file is ignored (it cannot be ours).
const MAX_FILE: u64 = 1024 * 1024;
/// A session id longer than this, or with characters outside printable ASCII, is ignored.
const MAX_ID: usize = 256;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    /// The agent's `agentInfo.name` when the sessions were made.
    agent: Option<String>,
    /// channel id → session id
    sessions: BTreeMap<String, String>,
}

/// One persona's saved sessions.
#[derive(Debug, Clone)]
pub struct SessionStore {
    path: PathBuf,
}

impl SessionStore {
    pub fn new(root: &Path, namespace: &str, persona: &str) -> SessionStore {
        SessionStore {
            path: super::workspace::persona_dir(root, namespace, persona).with_extension("json"),
        }
    }

    /// The session saved for `channel` with the agent named `agent`.
    pub fn get(&self, agent: Option<&str>, channel: &str) -> Option<String> {
        let saved = self.read();
        if saved.agent.as_deref() != agent {
            return None;
        }
        saved
            .sessions
            .get(channel)
            .filter(|id| plain_id(id))
            .cloned()
    }

    /// Saves `session` for `channel`; a failure is logged, never fatal (the conversation only
    /// starts blank next time).
    pub fn put(&self, agent: Option<&str>, channel: &str, session: &str) {
        if !plain_id(session) {
            return;
        }
        let mut saved = self.read();
        if saved.agent.as_deref() != agent {
            saved = Saved {
                agent: agent.map(str::to_string),
                sessions: BTreeMap::new(),
            };
        }
        if saved.sessions.get(channel).map(String::as_str) == Some(session) {
            return;
        }
        saved
            .sessions
            .insert(channel.to_string(), session.to_string());
        if let Err(e) = self.write(&saved) {
            tracing::warn!(file = %self.path.display(), "session ids not saved: {e}");
        }
    }

    fn read(&self) -> Saved {
        let Ok(meta) = std::fs::symlink_metadata(&self.path) else {
            return Saved::default();
        };
        if !meta.is_file() || meta.len() > MAX_FILE {
            return Saved::default();
        }
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Written whole through a temporary file: a crash mid-write leaves the old file.
    fn write(&self, saved: &Saved) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(saved).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &self.path)
    }
}

fn plain_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID && id.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_survive_per_agent_and_hostile_entries_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path(), "com.example.pack", "bee");
        assert_eq!(store.get(Some("codex"), "c1"), None);
        store.put(Some("codex"), "c1", "s-1");
        store.put(Some("codex"), "c2", "s-2");
        let again = SessionStore::new(dir.path(), "com.example.pack", "bee");
        assert_eq!(again.get(Some("codex"), "c1").as_deref(), Some("s-1"));
        assert_eq!(again.get(Some("claude"), "c1"), None, "another agent's ids");
        store.put(Some("codex"), "c3", "bad\nid");
        assert_eq!(store.get(Some("codex"), "c3"), None);
        std::fs::write(
            dir.path().join("com.example.pack/bee.json"),
            r#"{"agent":"codex","sessions":{"c1":"\u001b[2J"}}"#,
        )
        .unwrap();
        assert_eq!(store.get(Some("codex"), "c1"), None);
        std::fs::write(dir.path().join("com.example.pack/bee.json"), "not json").unwrap();
        assert_eq!(store.get(Some("codex"), "c1"), None);
    }
}
