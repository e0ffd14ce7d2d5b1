//! Hot reload: packs installed, upgraded or uninstalled while the harness runs ([`Reload`], sent
//! by `apiary up`'s watch of the install root) take effect without a restart.
//!
//! A changed pack, one persona at a time in routing terms but one pack at a time in work:
//! 1. each of its (persona, channel) queues is handed to a fresh one in the routing table: the
//!    old worker ends once it has answered what it took (its turn in flight is never cut short),
//!    while messages routed meanwhile wait in the fresh queue for the new version;
//! 2. the old workers drain (within the drain timeout), `on_stop` runs, the agents stop;
//! 3. the new version's personas start (as at start-up: workspace, skills, hooks, agent) and
//!    each takes its old routing slot with the waiting queue. A persona of the new version that
//!    is refused gets its old version started again, and the reload says so (`reload_failed`);
//!    a version that does not even load never gets here: `up` reports it and nothing stops.
//!
//! A new pack just starts; an uninstalled one leaves the routing table at once and drains. Each
//! reload is a `reloaded` note (`persona_stopped` for each persona that ended).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use nostr_sdk::prelude::Timestamp;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::event::Event;
use super::live::Live;
use super::{Harness, Note, PackRun, QUEUE_CAP, Reason, conflict, limits, route, worker};
use crate::relay::Message;
use crate::resolve::ResolvedPersona;

/// A change to the running packs.
pub enum Reload {
    /// A pack installed or upgraded: run this version, with its personas' spending limits by
    /// (pack id, persona name) (see [`super::Config::persona_limits`]).
    Upsert {
        run: Box<PackRun>,
        limits: HashMap<(String, String), limits::PersonaLimits>,
    },
    /// A pack uninstalled: stop its personas.
    Remove { pack_id: String },
}

/// One running pack: the version running, its started personas with their routing slots, and
/// their workers.
pub struct Running {
    pub(super) run: PackRun,
    pub(super) lives: Vec<(usize, Arc<Live>)>,
    pub(super) workers: JoinSet<()>,
}

impl Running {
    pub(super) fn new(run: PackRun) -> Running {
        Running {
            run,
            lives: Vec::new(),
            workers: JoinSet::new(),
        }
    }
}

/// The running packs by id.
pub type Fleet = HashMap<String, Running>;

/// Queues handed over from an old version's personas: (persona, channel id) → receiver.
type Held = HashMap<(String, String), mpsc::Receiver<(Message, Reason)>>;

/// Applies the reloads as they come, one at a time, until `stop`; hands the fleet back for the
/// drain. Without `reloads` it only waits.
pub(super) async fn reloader(
    mut h: Harness,
    router: route::Shared,
    mut fleet: Fleet,
    reloads: Option<mpsc::Receiver<Reload>>,
    channels: mpsc::UnboundedSender<Vec<String>>,
    mut stop: oneshot::Receiver<()>,
) -> Fleet {
    let Some(mut reloads) = reloads else {
        let _ = stop.await;
        return fleet;
    };
    loop {
        let change = tokio::select! {
            _ = &mut stop => break,
            change = reloads.recv() => match change {
                Some(change) => change,
                None => {
                    let _ = (&mut stop).await;
                    break;
                }
            },
        };
        let before = routed_channels(&router);
        match change {
            Reload::Upsert { run, limits } => {
                let id = run.resolved.pack.id.clone();
                h.config.persona_limits.retain(|(pack, _), _| *pack != id);
                h.config.persona_limits.extend(limits);
                upsert(&h, &router, &mut fleet, *run).await;
            }
            Reload::Remove { pack_id } => remove(&h, &router, &mut fleet, &pack_id).await,
        }
        let after = routed_channels(&router);
        if after != before
            && let Some(after) = after
        {
            let _ = channels.send(after.into_iter().collect());
        }
    }
    fleet
}

/// The channels routing serves now (`None` once it stopped).
fn routed_channels(router: &route::Shared) -> Option<BTreeSet<String>> {
    let guard = router.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref().map(|r| r.routes.keys().cloned().collect())
}

/// Runs `run` in place of the version of its pack running now, if any.
async fn upsert(h: &Harness, router: &route::Shared, fleet: &mut Fleet, run: PackRun) {
    let id = run.resolved.pack.id.clone();
    let version = run.pack.manifest.version.clone();
    let old = fleet.remove(&id);
    let from = old.as_ref().map(|o| o.run.pack.manifest.version.clone());
    let mut held = Held::new();
    let mut slots: HashMap<String, usize> = HashMap::new();
    let mut stopped = Vec::new();
    let mut old_run = None;
    if let Some(old) = old {
        let Some(h2) = hold(router, &old.lives) else {
            // Stopping: the drain ends the old version.
            fleet.insert(id, old);
            return;
        };
        held = h2;
        for (i, live) in &old.lives {
            slots.insert(live.trigger.name.clone(), *i);
            stopped.push(live.trigger.name.clone());
        }
        if let Some(desk) = &h.config.desk {
            desk.replace_pack(h, &id, &[]);
        }
        old_run = Some(stop_pack(h, old).await);
    }
    h.hooks.pack_changed(&id, Some(&run.pack));
    let others: Vec<Arc<Live>> = fleet
        .values()
        .flat_map(|r| r.lives.iter().map(|(_, l)| Arc::clone(l)))
        .collect();
    let mut started: Vec<Arc<Live>> = Vec::new();
    let mut refused = Vec::new();
    let mut kept = Vec::new();
    for (index, persona) in run.resolved.personas.iter().enumerate() {
        let name = &persona.identity.name;
        if !h.config.cluster.owns(&id, name) {
            continue;
        }
        let beside: Vec<(&str, &ResolvedPersona)> = others
            .iter()
            .chain(&started)
            .map(|l| (l.pack_id.as_str(), &l.resolved))
            .collect();
        let shared = conflict::shared_name(&beside, &id, persona);
        if let Some(live) = h.start_one(&run, index, persona, shared.clone()).await {
            let live = Arc::new(live);
            live.bind();
            started.push(live);
            continue;
        }
        refused.push(name.clone());
        // The old version of this persona, started again from the configuration it ran with.
        let Some(old) = old_run.as_ref() else {
            continue;
        };
        let Some((old_index, old_persona)) = old
            .resolved
            .personas
            .iter()
            .enumerate()
            .find(|(_, p)| p.identity.name == *name)
        else {
            continue;
        };
        h.hooks.pack_changed(&id, Some(&old.pack));
        let back = h.start_one(old, old_index, old_persona, shared).await;
        h.hooks.pack_changed(&id, Some(&run.pack));
        if let Some(live) = back {
            let live = Arc::new(live);
            live.bind();
            started.push(live);
            kept.push(name.clone());
        }
    }
    if let Some(desk) = &h.config.desk {
        desk.replace_pack(h, &id, &started);
    }
    let mut running = Running::new(run);
    running.lives = swap_in(
        h,
        router,
        started,
        &mut slots,
        &mut held,
        &mut running.workers,
    );
    report_lost(h, &held);
    let names: Vec<String> = running
        .lives
        .iter()
        .map(|(_, l)| l.trigger.name.clone())
        .collect();
    stopped.retain(|n| !names.contains(n));
    Upserted {
        id: &id,
        version: &version,
        from,
        names,
        stopped,
        refused,
        kept,
    }
    .report(h);
    fleet.insert(id, running);
}

/// What one install or upgrade did, for its `reloaded` (and `reload_failed`) notes.
struct Upserted<'a> {
    id: &'a str,
    version: &'a str,
    /// The version it replaced, if any.
    from: Option<String>,
    /// The personas now running.
    names: Vec<String>,
    /// The old version's personas that no longer run.
    stopped: Vec<String>,
    /// New-version personas that were refused ...
    refused: Vec<String>,
    /// ... of which these run their old version again.
    kept: Vec<String>,
}

impl Upserted<'_> {
    fn report(self, h: &Harness) {
        let Upserted {
            id,
            version,
            from,
            names,
            stopped,
            refused,
            kept,
        } = self;
        let action = if from.is_some() {
            "upgraded"
        } else {
            "installed"
        };
        let shown: Vec<String> = names
            .iter()
            .map(|n| match (&from, kept.contains(n)) {
                (Some(f), true) => format!("{n} (still {f})"),
                _ => n.clone(),
            })
            .collect();
        let text = format!(
            "reloaded {id} {action} {}{version}: running {}{}",
            from.as_ref()
                .map(|f| format!("{f} -> "))
                .unwrap_or_default(),
            list(&shown),
            if stopped.is_empty() {
                String::new()
            } else {
                format!("; stopped {}", list(&stopped))
            },
        );
        (h.out)(Note::new(
            Event::Reloaded {
                pack: id.to_string(),
                action: action.into(),
                from: from.clone(),
                to: Some(version.to_string()),
                personas: names,
                stopped,
            },
            text,
        ));
        if !refused.is_empty() {
            let why = format!(
                "{} of version {version} refused (see persona_refused); {}",
                list(&refused),
                if kept.is_empty() {
                    "nothing of it runs".to_string()
                } else {
                    format!(
                        "{} still run(s) version {}",
                        list(&kept),
                        from.as_deref().unwrap_or("?")
                    )
                }
            );
            let text = format!("reload_failed {id}: {why}");
            (h.out)(Note::new(
                Event::ReloadFailed {
                    pack: id.to_string(),
                    version: version.to_string(),
                    refused: Some(refused),
                    kept: Some(kept),
                    running: None,
                    reason: why,
                },
                text,
            ));
        }
    }
}

/// Stops an uninstalled pack: its personas leave routing at once, then drain and stop.
async fn remove(h: &Harness, router: &route::Shared, fleet: &mut Fleet, id: &str) {
    let Some(old) = fleet.remove(id) else {
        return;
    };
    {
        let mut guard = router.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = guard.as_mut() {
            for (i, _) in &old.lives {
                unroute(r, *i, &[]);
            }
        }
    }
    let version = old.run.pack.manifest.version.clone();
    let names: Vec<String> = old
        .lives
        .iter()
        .map(|(_, l)| l.trigger.name.clone())
        .collect();
    if let Some(desk) = &h.config.desk {
        desk.replace_pack(h, id, &[]);
    }
    stop_pack(h, old).await;
    h.hooks.pack_changed(id, None);
    let text = format!(
        "reloaded {id} uninstalled {version}: stopped {}",
        list(&names)
    );
    (h.out)(Note::new(
        Event::Reloaded {
            pack: id.to_string(),
            action: "uninstalled".into(),
            from: Some(version),
            to: None,
            personas: Vec::new(),
            stopped: names,
        },
        text,
    ));
}

/// Hands every queue of `lives` to a fresh one (the old senders go, so the old workers end once
/// they have answered what they took); the fresh queues' receivers, for the next version. `None`
/// when routing has stopped.
fn hold(router: &route::Shared, lives: &[(usize, Arc<Live>)]) -> Option<Held> {
    let mut guard = router.lock().unwrap_or_else(|e| e.into_inner());
    let r = guard.as_mut()?;
    let mut held = Held::new();
    for (i, live) in lives {
        for channel in live.channels.keys() {
            let key = (*i, channel.clone());
            if !r.queues.contains_key(&key) {
                continue;
            }
            let (tx, rx) = mpsc::channel(QUEUE_CAP);
            r.queues.insert(key, tx);
            held.insert((live.trigger.name.clone(), channel.clone()), rx);
        }
    }
    Some(held)
}

/// Lets a pack's workers finish (within the drain timeout), then stops its personas; the version
/// that ran.
async fn stop_pack(h: &Harness, mut running: Running) -> PackRun {
    let drained = tokio::time::timeout(h.config.drain_timeout, async {
        while running.workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(pack = %running.run.resolved.pack.id, "drain timeout reached while reloading; abandoning turns in flight");
        running.workers.abort_all();
    }
    for (_, live) in &running.lives {
        live.stop().await;
        let name = live.trigger.name.as_str();
        (h.out)(Note::new(
            Event::PersonaStopped {
                persona: name.to_string(),
                pack: live.pack_id.clone(),
            },
            format!("persona {name} stopped"),
        ));
    }
    running.run
}

/// Puts the started personas into routing, each in its old slot when it had one (with the queue
/// that waited for it), and starts their workers; slots of personas not started leave routing.
fn swap_in(
    h: &Harness,
    router: &route::Shared,
    started: Vec<Arc<Live>>,
    slots: &mut HashMap<String, usize>,
    held: &mut Held,
    workers: &mut JoinSet<()>,
) -> Vec<(usize, Arc<Live>)> {
    let mut guard = router.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = guard.as_mut() else {
        // Stopping: the drain stops them.
        return started.into_iter().map(|l| (usize::MAX, l)).collect();
    };
    let now = Timestamp::now();
    let mut placed = Vec::with_capacity(started.len());
    for live in started {
        let name = live.trigger.name.clone();
        let i = match slots.remove(&name) {
            Some(i) => {
                r.personas[i] = route::Routed::of(&live);
                i
            }
            None => {
                r.personas.push(route::Routed::of(&live));
                r.personas.len() - 1
            }
        };
        r.own
            .insert(live.keys.public_key(), Arc::new(live.member()));
        let channels: Vec<&String> = live.channels.keys().collect();
        unroute(r, i, &channels);
        for channel in live.channels.keys() {
            let rx = match held.remove(&(name.clone(), channel.clone())) {
                Some(rx) => rx,
                None => {
                    let (tx, rx) = mpsc::channel(QUEUE_CAP);
                    r.queues.insert((i, channel.clone()), tx);
                    rx
                }
            };
            let routes = r.routes.entry(channel.clone()).or_insert_with(|| {
                r.fresh.insert(channel.clone(), now);
                Vec::new()
            });
            if !routes.contains(&i) {
                routes.push(i);
            }
            workers.spawn(worker::worker(
                h.clone(),
                Arc::clone(&live),
                channel.clone(),
                rx,
            ));
        }
        placed.push((i, live));
    }
    for (_, i) in slots.drain() {
        unroute(r, i, &[]);
    }
    placed
}

/// Takes slot `i` out of routing for every channel but `keep`.
fn unroute(r: &mut route::Router, i: usize, keep: &[&String]) {
    r.queues
        .retain(|(slot, channel), _| *slot != i || keep.contains(&channel));
    r.routes.retain(|channel, slots| {
        if !keep.contains(&channel) {
            slots.retain(|s| *s != i);
        }
        !slots.is_empty()
    });
}

/// Messages that waited for a persona the new version no longer has (or no longer subscribes
/// there) are not answered: each is reported.
fn report_lost(h: &Harness, held: &Held) {
    for ((persona, channel), rx) in held {
        let waiting = rx.len();
        if waiting > 0 {
            tracing::warn!(%persona, %channel, waiting, "messages for a persona its new version no longer runs there; not answered");
            (h.out)(Note::new(
                Event::Limited {
                    persona: persona.clone(),
                    channel: None,
                    channel_id: Some(channel.clone()),
                    id: None,
                    author: None,
                    limit: "reload".into(),
                    action: "dropped".into(),
                    allowed: None,
                    used: None,
                    turns: None,
                    per_secs: None,
                    count: Some(waiting),
                },
                format!(
                    "limited {persona}: {waiting} message(s) waiting for it are dropped: its pack's new version no longer runs it in that channel"
                ),
            ));
        }
    }
}

/// `a, b, c`, or `-` for none.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".into()
    } else {
        names.join(", ")
    }
}
