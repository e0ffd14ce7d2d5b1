//! The events routing takes, and how far behind it is.
//!
//! With the process's own embedded relay ([`RelayLink::InProcess`](super::RelayLink)), events come
//! from the relay's [`Tap`] as it stores them, in batches, with no subscription on the relay: the
//! filter a subscription would carry is applied here, and what it would
//! replay on subscribing (from the `since` cursor, or for channels a reload added) comes from the
//! relay's store ([`TapFeed::replay`]). With any other relay they arrive on the harness's
//! subscription through the relay pool (the event loop in `lib.rs`).
//!
//! Either way [`Intake`] says how far behind routing is: `intake` (depth and lag, for `/metrics`
//! and the status view) every [`REPORT_EVERY`] while events wait (or waited 10 ms or more), and a
//! `behind` warning past
//! [`BEHIND_LAG`] or [`BEHIND_DEPTH`], repeated every [`WARN_EVERY`] until `caught_up`.

use std::time::{Duration, Instant};

use nostr_sdk::prelude::*;

use super::event::Event as Reported;
use super::{Note, Out, relay, route};
use relay::embedded::Door;
use relay::tap::{Tap, Tapped};

/// Events routed at most at once (then the workers just woken get to run).
const BATCH: usize = 256;
/// How often depth and lag are reported.
pub(super) const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Less lag than this, with nothing waiting, is not worth a report.
const QUIET_LAG: Duration = Duration::from_millis(10);
/// Routing is behind when an event waited this long for it…
pub(super) const BEHIND_LAG: Duration = Duration::from_millis(500);
/// …or this many wait.
pub(super) const BEHIND_DEPTH: usize = 2_000;
/// While behind, the warning is repeated this often.
pub(super) const WARN_EVERY: Duration = Duration::from_secs(10);

/// The embedded relay's events, filtered as the harness's subscription would be.
pub(super) struct TapFeed {
    tap: Tap,
    door: Door,
    live: Filter,
    batch: Vec<Tapped>,
}

impl TapFeed {
    /// Taps the relay first, so nothing stored while the replay runs is missed (routing drops
    /// what it sees twice).
    pub fn open(door: &Door, live: Filter) -> TapFeed {
        TapFeed {
            tap: door.tap(),
            door: door.clone(),
            live,
            batch: Vec::with_capacity(BATCH),
        }
    }

    /// Routes what the relay stored that `filter` matches, oldest first: the subscription's
    /// replay.
    pub async fn replay(&self, router: &route::Shared, filter: Filter) {
        match self.door.stored(filter).await {
            Ok(events) => {
                for event in &events {
                    route::route(router, event);
                }
            }
            Err(e) => tracing::warn!("reading the relay's stored events to replay: {e}"),
        }
    }

    /// The filter live events must match from now on.
    pub fn follow(&mut self, live: Filter) {
        self.live = live;
    }

    /// Waits for the next events and routes the ones the filter admits; whether any woke a
    /// persona. `None` when the relay is gone.
    pub async fn route_next(
        &mut self,
        router: &route::Shared,
        intake: &mut Intake,
    ) -> Option<bool> {
        if self.tap.recv_many(&mut self.batch, BATCH).await == 0 {
            return None;
        }
        let mut woke = false;
        for tapped in self.batch.drain(..) {
            intake.waited(tapped.at);
            if admits(&self.live, &tapped.event) {
                woke |= route::route(router, &tapped.event);
            }
        }
        Some(woke)
    }

    /// Events stored and not yet routed.
    pub fn depth(&self) -> usize {
        self.tap.depth()
    }
}

/// What the relay would have sent a subscription with this filter (not expired: NIP-40).
fn admits(live: &Filter, event: &Event) -> bool {
    live.match_event(event, MatchEventOptions::new()) && !event.is_expired()
}

/// Waits for `feed`'s next events; never, without a feed.
pub(super) async fn route_next(
    feed: Option<&mut TapFeed>,
    router: &route::Shared,
    intake: &mut Intake,
) -> Option<bool> {
    match feed {
        Some(feed) => feed.route_next(router, intake).await,
        None => std::future::pending().await,
    }
}

/// Depth and lag since the last report, and whether the warning stands.
pub(super) struct Intake {
    out: Out,
    /// The longest an event routed since the last report waited for routing.
    worst: Duration,
    /// The last report said something was waiting (so the next one says when nothing is).
    waiting: bool,
    /// Behind: when the warning was last given.
    warned: Option<Instant>,
}

impl Intake {
    pub fn new(out: Out) -> Intake {
        Intake {
            out,
            worst: Duration::ZERO,
            waiting: false,
            warned: None,
        }
    }

    /// An event reached routing; it had been waiting since `since`.
    pub fn waited(&mut self, since: Instant) {
        self.worst = self.worst.max(since.elapsed());
    }

    /// Reports `depth` events waiting now and the worst lag since the last report.
    pub fn report(&mut self, depth: usize, now: Instant) {
        let lag = std::mem::take(&mut self.worst);
        let lag_ms = lag.as_millis() as u64;
        let waiting = depth > 0 || lag >= QUIET_LAG;
        if waiting || self.waiting {
            (self.out)(Note::only_json(Reported::Intake {
                depth: depth as u64,
                lag_ms,
            }));
        }
        self.waiting = waiting;
        let behind = lag >= BEHIND_LAG || depth >= BEHIND_DEPTH;
        match (behind, self.warned) {
            (true, Some(at)) if now.duration_since(at) < WARN_EVERY => {}
            (true, _) => {
                self.warned = Some(now);
                tracing::warn!(depth, lag_ms, "routing is behind the relay");
                let text = format!(
                    "behind: {depth} events wait for routing, the slowest waited {lag_ms} ms: more arrives than this replica answers (more replicas: `up --shard i/N`)"
                );
                (self.out)(Note::new(
                    Reported::Behind {
                        depth: depth as u64,
                        lag_ms,
                    },
                    text,
                ));
            }
            (false, Some(_)) => {
                self.warned = None;
                (self.out)(Note::new(
                    Reported::CaughtUp { lag_ms },
                    format!("caught up: routing keeps up with the relay again (lag {lag_ms} ms)"),
                ));
            }
            (false, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn recording() -> (Out, Arc<Mutex<Vec<Reported>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out: Out = {
            let seen = Arc::clone(&seen);
            Arc::new(move |n: Note| seen.lock().unwrap().push(n.event))
        };
        (out, seen)
    }

    #[test]
    fn waiting_is_reported_until_it_is_zero_and_falling_behind_warns_once_then_clears() {
        let (out, seen) = recording();
        let mut intake = Intake::new(out);
        let t0 = Instant::now();
        intake.report(0, t0);
        assert!(
            seen.lock().unwrap().is_empty(),
            "nothing waits: nothing said"
        );
        intake.report(3, t0);
        intake.waited(Instant::now() - Duration::from_millis(700));
        intake.report(BEHIND_DEPTH + 1, t0 + Duration::from_secs(1));
        intake.report(BEHIND_DEPTH + 1, t0 + Duration::from_secs(2));
        intake.report(0, t0 + Duration::from_secs(3));
        intake.report(0, t0 + Duration::from_secs(4));
        let seen = seen.lock().unwrap();
        let kinds: Vec<&'static str> = seen.iter().map(<&'static str>::from).collect();
        assert_eq!(
            kinds,
            [
                "intake",
                "intake",
                "behind",
                "intake",
                "intake",
                "caught_up"
            ],
            "{seen:?}"
        );
        assert!(matches!(seen[1], Reported::Intake { lag_ms, .. } if lag_ms >= 700));
    }
}
