//! Supervision of one persona's agent process: when the agent dies (or a turn panics), it is
//! replaced by a fresh one after a backoff that doubles per recent restart; too many restarts
//! within a window open the circuit and the persona stops taking turns. A turn the agent died
//! under is retried a bounded number of times.
//!
//! Kept apart from the relay and the ACP client so the decisions can be tested with a fake clock
//! (instants passed in) and a fake agent (any [`Supervised`]).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DispatchError;

/// The restart rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Policy {
    /// A turn is tried at most this many times when the agent dies under it.
    pub max_attempts: u32,
    /// The wait before the first restart within the window; it doubles with each further one.
    pub backoff: Duration,
    /// No wait is longer than this.
    pub max_backoff: Duration,
    /// This many restarts within `window` open the circuit.
    pub breaker_restarts: usize,
    pub window: Duration,
}

impl Policy {
    pub const DEFAULT: Policy = Policy {
        max_attempts: 3,
        backoff: Duration::from_millis(250),
        max_backoff: Duration::from_secs(10),
        breaker_restarts: 5,
        window: Duration::from_secs(300),
    };

    /// Whether a turn that has been tried `attempts` times may be tried again after a crash.
    pub fn retries(&self, attempts: u32) -> bool {
        attempts < self.max_attempts
    }

    /// The wait before the `nth` restart within the window (1-based).
    fn backoff(&self, nth: usize) -> Duration {
        // The exponent is capped so the doubling cannot overflow before `max_backoff` applies.
        let doublings = nth.saturating_sub(1).min(6) as u32;
        (self.backoff * 2u32.pow(doublings)).min(self.max_backoff)
    }
}

/// What to do about a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Restart after `backoff`; this is the `nth` restart within the window.
    Restart { nth: usize, backoff: Duration },
    /// The circuit is open: `crashes` restarts already happened within the window.
    Open { crashes: usize },
}

/// The recent restarts of one agent: the backoff, and apiary's circuit breaker counting restarts
/// within the window (no cooldown: the circuit stays open while they are recent).
#[derive(Debug)]
pub(super) struct Breaker {
    policy: Policy,
    restarts: apiary_limits::Breaker,
}

impl Breaker {
    pub fn new(policy: Policy) -> Breaker {
        Breaker {
            policy,
            restarts: apiary_limits::Breaker::new(apiary_limits::BreakerPolicy {
                threshold: u32::try_from(policy.breaker_restarts).unwrap_or(u32::MAX),
                window: Some(policy.window),
                cooldown: None,
            }),
        }
    }

    /// Decides about a crash at `now`; a restart is counted, a refusal is not.
    pub fn crashed(&mut self, now: Instant) -> Verdict {
        if let Err(open) = self.restarts.admit(now) {
            return Verdict::Open {
                crashes: open.failures as usize,
            };
        }
        self.restarts.record(false, now);
        let nth = self.restarts.counted() as usize;
        Verdict::Restart {
            nth,
            backoff: self.policy.backoff(nth),
        }
    }
}

/// A supervised agent: which run of it this is, and how to stop it.
pub(super) trait Supervised: Send + Sync {
    /// 0 for the first run, one more for each restart.
    fn generation(&self) -> u64;
    fn stop(&self) -> impl Future<Output = ()> + Send;
}

/// The running agent of one persona, replaced on restart.
pub(super) struct Supervisor<A> {
    policy: Policy,
    current: tokio::sync::Mutex<Arc<A>>,
    breaker: std::sync::Mutex<Breaker>,
}

/// What a restart did.
pub(super) enum Restarted<A> {
    /// Another caller already replaced that generation: this is its replacement.
    Already(Arc<A>),
    /// A fresh agent (the restart was announced).
    Fresh(Arc<A>),
}

impl<A> Restarted<A> {
    pub fn agent(self) -> Arc<A> {
        match self {
            Restarted::Already(a) | Restarted::Fresh(a) => a,
        }
    }
}

impl<A: Supervised> Supervisor<A> {
    pub fn new(first: A, policy: Policy) -> Supervisor<A> {
        Supervisor {
            policy,
            current: tokio::sync::Mutex::new(Arc::new(first)),
            breaker: std::sync::Mutex::new(Breaker::new(policy)),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub async fn current(&self) -> Arc<A> {
        Arc::clone(&*self.current.lock().await)
    }

    /// Replaces the agent of `generation`, unless somebody already did: asks the breaker, stops
    /// the old agent, waits the backoff, then `start(generation + 1)`. `announce(nth)` runs before
    /// the fresh agent is handed to anyone else, so its report comes before any use of it.
    /// A failed start leaves the old (stopped) agent in place; the restart still counts.
    pub async fn restart<F, Fut>(
        &self,
        generation: u64,
        start: F,
        announce: impl FnOnce(usize),
    ) -> Result<Restarted<A>, DispatchError>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<A, DispatchError>>,
    {
        let mut slot = self.current.lock().await;
        if slot.generation() != generation {
            return Ok(Restarted::Already(Arc::clone(&*slot)));
        }
        let verdict = self
            .breaker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .crashed(Instant::now());
        let (nth, backoff) = match verdict {
            Verdict::Open { crashes } => {
                return Err(DispatchError::CircuitOpen {
                    crashes,
                    window: self.policy.window,
                });
            }
            Verdict::Restart { nth, backoff } => (nth, backoff),
        };
        slot.stop().await;
        tokio::time::sleep(backoff).await;
        let fresh = Arc::new(start(generation + 1).await?);
        announce(nth);
        *slot = Arc::clone(&fresh);
        Ok(Restarted::Fresh(fresh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const MS: Duration = Duration::from_millis(1);

    /// The default rules with no waiting, for the async tests.
    fn quick() -> Policy {
        Policy {
            backoff: Duration::ZERO,
            ..Policy::DEFAULT
        }
    }

    struct Fake {
        generation: u64,
        stops: Arc<AtomicUsize>,
    }

    impl Supervised for Fake {
        fn generation(&self) -> u64 {
            self.generation
        }
        async fn stop(&self) {
            self.stops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn fake(generation: u64, stops: &Arc<AtomicUsize>) -> Fake {
        Fake {
            generation,
            stops: Arc::clone(stops),
        }
    }

    /// Starts fakes of the generation asked for.
    fn starter(
        stops: &Arc<AtomicUsize>,
    ) -> impl Fn(u64) -> std::future::Ready<Result<Fake, DispatchError>> {
        let stops = Arc::clone(stops);
        move |g| std::future::ready(Ok(fake(g, &stops)))
    }

    #[test]
    fn backoff_doubles_until_the_circuit_opens() {
        let mut b = Breaker::new(Policy::DEFAULT);
        let t0 = Instant::now();
        let waits: Vec<Verdict> = (0..6).map(|i| b.crashed(t0 + MS * i)).collect();
        let expected = [250, 500, 1000, 2000, 4000]
            .iter()
            .enumerate()
            .map(|(i, ms)| Verdict::Restart {
                nth: i + 1,
                backoff: MS * *ms,
            })
            .chain([Verdict::Open { crashes: 5 }])
            .collect::<Vec<_>>();
        assert_eq!(waits, expected);
        // A refusal is not counted: the circuit stays open, with the same count.
        assert_eq!(b.crashed(t0 + MS * 10), Verdict::Open { crashes: 5 });
    }

    #[test]
    fn restarts_older_than_the_window_are_forgotten() {
        let window = Policy::DEFAULT.window;
        let mut b = Breaker::new(Policy::DEFAULT);
        let t0 = Instant::now();
        for i in 0..5 {
            b.crashed(t0 + Duration::from_secs(i));
        }
        assert_eq!(
            b.crashed(t0 + window),
            Verdict::Open { crashes: 5 },
            "still within the window of the first"
        );
        // Just past the window of the first two: two places free, the backoff shrinks with them.
        let later = t0 + window + Duration::from_secs(1) + MS;
        assert_eq!(
            b.crashed(later),
            Verdict::Restart {
                nth: 4,
                backoff: MS * 2000
            }
        );
        // Long after: a fresh start.
        assert_eq!(
            b.crashed(later + window * 2),
            Verdict::Restart {
                nth: 1,
                backoff: MS * 250
            }
        );
    }

    #[test]
    fn backoff_is_capped() {
        let policy = Policy {
            breaker_restarts: 20,
            ..Policy::DEFAULT
        };
        let mut b = Breaker::new(policy);
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..12)
            .map(|i| match b.crashed(t0 + MS * i) {
                Verdict::Restart { backoff, .. } => backoff,
                Verdict::Open { .. } => panic!("opened at {i}"),
            })
            .collect();
        assert_eq!(waits[5], MS * 8000);
        assert!(
            waits[6..].iter().all(|w| *w == policy.max_backoff),
            "{waits:?}"
        );
    }

    #[test]
    fn a_turn_is_tried_at_most_max_attempts_times() {
        let p = Policy::DEFAULT;
        assert!(p.retries(1) && p.retries(2));
        assert!(!p.retries(3) && !p.retries(4));
    }

    #[tokio::test]
    async fn restart_stops_the_old_agent_and_starts_the_next_generation() {
        let stops = Arc::new(AtomicUsize::new(0));
        let s = Supervisor::new(fake(0, &stops), quick());
        let mut announced = None;
        let r = s
            .restart(0, starter(&stops), |n| announced = Some(n))
            .await
            .unwrap();
        let Restarted::Fresh(agent) = r else {
            panic!("not restarted");
        };
        assert_eq!((agent.generation, announced), (1, Some(1)));
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        assert_eq!(s.current().await.generation, 1);
    }

    #[tokio::test]
    async fn a_stale_generation_gets_the_replacement_without_a_restart() {
        let stops = Arc::new(AtomicUsize::new(0));
        let s = Supervisor::new(fake(0, &stops), quick());
        s.restart(0, starter(&stops), |_| {}).await.unwrap();
        // A second caller that saw generation 0 die too.
        let r = s
            .restart(
                0,
                |_| async { panic!("started twice") },
                |_| panic!("announced twice"),
            )
            .await
            .unwrap();
        assert!(matches!(&r, Restarted::Already(a) if a.generation == 1));
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        // Only one restart was counted: four more are allowed before the circuit opens.
        for g in 1..5 {
            s.restart(g, starter(&stops), |_| {}).await.unwrap();
        }
        let open = s.restart(5, |_| async { panic!("started") }, |_| {}).await;
        assert!(matches!(
            open,
            Err(DispatchError::CircuitOpen { crashes: 5, .. })
        ));
    }

    #[tokio::test]
    async fn concurrent_restarts_of_one_generation_start_one_agent() {
        let stops = Arc::new(AtomicUsize::new(0));
        let starts = AtomicUsize::new(0);
        let s = Supervisor::new(
            fake(0, &stops),
            Policy {
                backoff: MS * 20,
                ..Policy::DEFAULT
            },
        );
        let start = |g| {
            starts.fetch_add(1, Ordering::SeqCst);
            let stops = Arc::clone(&stops);
            async move { Ok(fake(g, &stops)) }
        };
        let (a, b) = tokio::join!(s.restart(0, start, |_| {}), s.restart(0, start, |_| {}));
        let (a, b) = (a.unwrap().agent(), b.unwrap().agent());
        assert_eq!((a.generation, b.generation), (1, 1));
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert_eq!(stops.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_open_circuit_neither_stops_nor_starts() {
        let stops = Arc::new(AtomicUsize::new(0));
        let s = Supervisor::new(
            fake(0, &stops),
            Policy {
                breaker_restarts: 1,
                ..quick()
            },
        );
        s.restart(0, starter(&stops), |_| {}).await.unwrap();
        let err = s
            .restart(1, |_| async { panic!("started") }, |_| panic!("announced"))
            .await
            .err()
            .expect("circuit open");
        assert_eq!(
            err.to_string(),
            format!(
                "circuit open: the agent crashed 1 times within {:?}",
                Policy::DEFAULT.window
            )
        );
        assert_eq!(err.kind(), "circuit-open");
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        assert_eq!(s.current().await.generation, 1);
    }

    #[tokio::test]
    async fn a_failed_start_keeps_the_old_agent_and_counts() {
        let stops = Arc::new(AtomicUsize::new(0));
        let s = Supervisor::new(
            fake(0, &stops),
            Policy {
                breaker_restarts: 2,
                ..quick()
            },
        );
        let failed = s
            .restart(
                0,
                |_| async { Err(DispatchError::NoSession) },
                |_| panic!("announced"),
            )
            .await;
        assert!(matches!(failed, Err(DispatchError::NoSession)));
        assert_eq!(s.current().await.generation, 0);
        // Retried on the same generation: the second restart within the window.
        let mut announced = None;
        let r = s
            .restart(0, starter(&stops), |n| announced = Some(n))
            .await
            .unwrap();
        assert!(matches!(r, Restarted::Fresh(_)) && announced == Some(2));
        assert_eq!(stops.load(Ordering::SeqCst), 2);
    }
}
