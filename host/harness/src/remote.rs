//! Turns asked for from outside the relay (an A2A client, through `apiary up --a2a-addr`): the
//! [`Desk`] holds the running personas once they started, and [`Desk::ask`] runs one turn of a
//! persona as a relay message would (its agent, confinement, spending limits, the redaction of
//! what it answers), in a session of its own per conversation (`context`), cancellable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::event::Event;
use super::live::Live;
use super::supervise::Supervised;
use super::{Harness, Note};
use crate::acp::AcpError;

/// How often a cancel is sent again while the agent has not ended the turn.
const CANCEL_AGAIN: std::time::Duration = std::time::Duration::from_millis(250);
/// Conversations kept per persona; past it the oldest session is forgotten (the agent keeps it).
const CONTEXTS_MAX: usize = 1024;

/// Why a turn asked for from outside did not answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("no persona {persona} of {pack} runs here")]
    NoPersona { pack: String, persona: String },
    #[error("the persona is over its {limit} ({used} of {allowed})")]
    Limited {
        limit: String,
        used: u64,
        allowed: u64,
    },
    #[error("the turn was canceled")]
    Canceled,
    #[error("the agent failed: {0}")]
    Agent(String),
}

/// A turn's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The agent's final text, with any secret it held replaced.
    pub text: String,
    /// Why the agent stopped (`end_turn`, `max_tokens`, `cancelled`, …).
    pub stop_reason: String,
}

struct Desked {
    h: Harness,
    live: Arc<Live>,
    /// (agent generation, context) → session id.
    sessions: Mutex<HashMap<(u64, String), String>>,
}

/// The personas that can be asked for a turn, filled by the harness once they run.
#[derive(Default)]
pub struct Desk {
    personas: Mutex<HashMap<(String, String), Arc<Desked>>>,
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desk").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Desk {
    pub(super) fn register(&self, h: &Harness, lives: &[Arc<Live>]) {
        let mut personas = lock(&self.personas);
        for live in lives {
            let key = (live.pack_id.clone(), live.trigger.name.clone());
            personas.insert(
                key,
                Arc::new(Desked {
                    h: h.clone(),
                    live: Arc::clone(live),
                    sessions: Mutex::default(),
                }),
            );
        }
    }

    /// Serves exactly `lives` for pack `pack` (a hot reload restarted it; empty: it was removed),
    /// so a persona the reload stopped is never asked, or started again, through the desk.
    pub(super) fn replace_pack(&self, h: &Harness, pack: &str, lives: &[Arc<Live>]) {
        lock(&self.personas).retain(|(p, _), _| p != pack);
        self.register(h, lives);
    }

    /// Forgets every persona (the harness is stopping): no new turn starts, and nothing here keeps
    /// a stopped persona (its agent, its egress socket) alive.
    pub(super) fn clear(&self) {
        lock(&self.personas).clear();
    }

    /// Whether persona `persona` of pack `pack` runs here.
    pub fn has(&self, pack: &str, persona: &str) -> bool {
        lock(&self.personas).contains_key(&(pack.to_string(), persona.to_string()))
    }

    /// One turn of `persona` on `text` in conversation `context`; `cancel` ends it early (the
    /// agent is sent `session/cancel`).
    pub async fn ask(
        &self,
        pack: &str,
        persona: &str,
        context: &str,
        text: String,
        cancel: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<Answer, AskError> {
        let desked = lock(&self.personas)
            .get(&(pack.to_string(), persona.to_string()))
            .cloned()
            .ok_or_else(|| AskError::NoPersona {
                pack: pack.to_string(),
                persona: persona.to_string(),
            })?;
        let answer = desked.turn(context, text, cancel).await;
        let (outcome, text) = match &answer {
            Ok(a) => (
                a.stop_reason.clone(),
                format!("a2a {persona} {context}: answered ({})", a.stop_reason),
            ),
            Err(e) => (
                "failed".to_string(),
                format!("a2a {persona} {context}: {e}"),
            ),
        };
        (desked.h.out)(Note::new(
            Event::A2aTurn {
                persona: persona.to_string(),
                pack: pack.to_string(),
                context: context.to_string(),
                outcome,
            },
            text,
        ));
        answer
    }
}

impl Desked {
    async fn turn(
        &self,
        context: &str,
        text: String,
        cancel: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<Answer, AskError> {
        let live = &self.live;
        if let Err(over) = lock(&live.budget).take(Instant::now()) {
            return Err(AskError::Limited {
                limit: over.limit.to_string(),
                used: over.used,
                allowed: over.allowed,
            });
        }
        let mut agent = live.current().await;
        if !agent.client.is_alive() {
            agent = live
                .restart(agent.generation(), &self.h.out)
                .await
                .map_err(|e| AskError::Agent(e.to_string()))?;
        }
        let session = self.session(&agent, context).await?;
        let prompt = match &agent.prefix {
            Some((base, system)) => {
                let base = base
                    .as_deref()
                    .map(|b| format!("{b}\n\n"))
                    .unwrap_or_default();
                format!("{base}{system}\n\n{text}")
            }
            None => text,
        };
        let config = &self.h.config;
        let turn = agent
            .client
            .prompt(&session, prompt, config.idle_timeout, config.turn_timeout);
        tokio::pin!(turn);
        let mut cancel = cancel;
        let result = tokio::select! {
            t = &mut turn => t,
            Ok(()) = &mut cancel => {
                // Sent again until the turn ends: a cancel that reaches the agent before the
                // prompt it cancels is ignored. The agent then ends the prompt (`cancelled`).
                loop {
                    agent.client.cancel(&session).await;
                    tokio::select! {
                        _ = &mut turn => return Err(AskError::Canceled),
                        _ = tokio::time::sleep(CANCEL_AGAIN) => {}
                    }
                }
            }
        };
        let turn = result.map_err(|e: AcpError| AskError::Agent(e.to_string()))?;
        if let Some(tokens) = turn.tokens {
            lock(&live.budget).spent(Instant::now(), tokens);
        }
        let (text, _found) = self.h.redactor.redact(turn.text.trim());
        Ok(Answer {
            text,
            // As ACP spells it (`end_turn`).
            stop_reason: serde_json::to_value(turn.stop_reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{:?}", turn.stop_reason)),
        })
    }

    /// The session of `context` on this agent run, opened on first use.
    async fn session(&self, agent: &super::live::Agent, context: &str) -> Result<String, AskError> {
        let key = (agent.generation(), context.to_string());
        if let Some(s) = lock(&self.sessions).get(&key) {
            return Ok(s.clone());
        }
        let session = self
            .live
            .new_session(agent)
            .await
            .map_err(|e| AskError::Agent(e.to_string()))?;
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= CONTEXTS_MAX {
            sessions.clear();
        }
        sessions.insert(key, session.clone());
        Ok(session)
    }
}
