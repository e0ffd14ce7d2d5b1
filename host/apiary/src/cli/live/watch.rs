//! `up` running the installed packs watches the install root: every second it reads `pack.lock`
//! (under the root's shared lock, so never halfway through an install) and hands each pack
//! installed, upgraded or uninstalled since to the harness as a [`Reload`]. A new version is
//! loaded, validated and resolved here first, exactly as at start-up; one that does not load is
//! reported (`reload_failed`) and the version running keeps running.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Identities, packs};
use crate::dispatch::{self, Note, PackRun, Reload};
use crate::dist::lock::LockEntry;
use crate::dist::trust::{PackRef, TrustView};
use crate::relay::keys::KeyStore;

/// A pack ready to run: the run, its personas' spending limits, the notes of what was held back.
type Loaded = (
    PackRun,
    HashMap<(String, String), dispatch::limits::PersonaLimits>,
    Vec<Note>,
);

/// How often `pack.lock` is read: a small file, under a shared lock.
const EVERY: Duration = Duration::from_secs(1);

/// What loading a pack needs, as at start-up.
pub(super) struct Watch {
    pub root: PathBuf,
    /// Only these pack ids (`up <pack-id>...`); `None`: every installed pack.
    pub only: Option<BTreeSet<String>>,
    pub overrides: Option<PathBuf>,
    pub keys: KeyStore,
    pub allow_conflict: bool,
    /// `--trust-hooks`: what `up` started with; anything else asks the trust store.
    pub at_start: Option<Arc<TrustView>>,
}

/// Starts watching; the harness reads the changes from the receiver. `known`: the lock entries
/// of what runs now.
pub(super) fn start(
    watch: Watch,
    known: BTreeMap<String, LockEntry>,
    out: dispatch::Out,
) -> mpsc::Receiver<Reload> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(run(Arc::new(watch), known, tx, out));
    rx
}

async fn run(
    watch: Arc<Watch>,
    mut known: BTreeMap<String, LockEntry>,
    tx: mpsc::Sender<Reload>,
    out: dispatch::Out,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut unreadable = false;
    loop {
        tick.tick().await;
        if tx.is_closed() {
            return;
        }
        let w = Arc::clone(&watch);
        let read = tokio::task::spawn_blocking(move || {
            packs::lock(&w.root)
                .map(|l| packs::present(&w.root, l))
                .map_err(|f| f.message().trim().to_string())
        })
        .await;
        let now = match read {
            Ok(Ok(mut now)) => {
                unreadable = false;
                if let Some(only) = &watch.only {
                    now.retain(|id, _| only.contains(id));
                }
                now
            }
            Ok(Err(why)) => {
                if !unreadable {
                    tracing::warn!("watching the install root: {why}");
                }
                unreadable = true;
                continue;
            }
            Err(_) => continue,
        };
        if now == known {
            continue;
        }
        for (id, entry) in &now {
            if known.get(id) == Some(entry) {
                continue;
            }
            let running = known.contains_key(id);
            let (w, pack) = (Arc::clone(&watch), id.clone());
            let loaded = tokio::task::spawn_blocking(move || load(&w, &pack))
                .await
                .unwrap_or_else(|e| Err(format!("loading it panicked: {e}")));
            match loaded {
                Ok((run, limits, notes)) => {
                    for note in notes {
                        out(note);
                    }
                    let change = Reload::Upsert {
                        run: Box::new(run),
                        limits,
                    };
                    if tx.send(change).await.is_err() {
                        return;
                    }
                }
                Err(why) => out(failed(id, &entry.version, running, &why)),
            }
        }
        for id in known.keys().filter(|id| !now.contains_key(*id)) {
            let change = Reload::Remove {
                pack_id: id.clone(),
            };
            if tx.send(change).await.is_err() {
                return;
            }
        }
        known = now;
    }
}

/// The installed pack `id` loaded as `up` loads it at start-up: validated, resolved with the
/// overrides, under its identity, untrusted stdio MCP servers held back (their notes), with its
/// personas' spending limits. `Err`: why it cannot run.
fn load(w: &Watch, id: &str) -> Result<Loaded, String> {
    // One line: the report's findings (file and line) and its conclusion.
    let why = |f: super::Failed| {
        f.message()
            .lines()
            .map(|l| {
                l.trim()
                    .trim_start_matches("error: ")
                    .trim_end_matches("; not starting")
            })
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let identities = Identities {
        root: Some(w.root.clone()),
        keys: &w.keys,
        allow_conflict: w.allow_conflict,
    };
    let mut runs =
        super::load_packs(&[w.root.join(id)], w.overrides.as_deref(), &identities).map_err(why)?;
    let limits = super::persona_limits(&runs, w.overrides.as_deref(), &w.root).map_err(why)?;
    let refs: Vec<PackRef> = runs.iter().map(|r| PackRef::of(&r.pack)).collect();
    let notes = super::withhold_untrusted_mcp(
        &mut runs,
        &refs,
        &TrustView::load(&w.root),
        w.at_start.as_deref(),
    );
    let run = runs.pop().ok_or("no pack loaded")?;
    if run.resolved.pack.id != id {
        return Err(format!(
            "its manifest declares the id `{}`",
            run.resolved.pack.id
        ));
    }
    Ok((run, limits, notes))
}

/// `reload_failed`: the version installed does not load; what runs of the pack keeps running.
fn failed(id: &str, version: &str, running: bool, why: &str) -> Note {
    let keeps = if running {
        "what runs of it keeps running"
    } else {
        "it does not run"
    };
    tracing::warn!(pack = %id, "reload of version {version} failed: {why}");
    Note::new(
        crate::dispatch::event::Event::ReloadFailed {
            pack: id.to_string(),
            version: version.to_string(),
            refused: None,
            kept: None,
            running: Some(running),
            reason: why.to_string(),
        },
        format!("reload_failed {id} {version}: {why}; {keeps}"),
    )
}
