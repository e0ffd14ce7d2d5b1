//! The dispatcher's trigger matcher and hook runner backed by the sandbox (issue 3): the built-in
//! `trigger-default` component decides wakes; `.wasm` hooks run as sandboxed components with the
//! persona's workspace preopened. Script hooks are never run by the live harness (they would run on
//! the host): they are reported once and skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::hooks::{HookPoint, HookRunner};
use super::trigger::{Reason, TriggerMatcher, TriggerPersona};
use crate::relay::Message;
use crate::resolve::ResolvedPersona;
use crate::sandbox::{self, Sandbox};

/// A hook component larger than this is refused before it is read whole.
const MAX_HOOK_FILE: u64 = 64 * 1024 * 1024;

/// Triggers decided by the built-in `trigger-default` component.
pub struct SandboxTriggers {
    sandbox: &'static Sandbox,
    runner: sandbox::trigger::TriggerRunner,
}

impl SandboxTriggers {
    pub fn builtin() -> Result<SandboxTriggers, String> {
        let sandbox = Sandbox::shared()?;
        let runner =
            sandbox::trigger::TriggerRunner::builtin(sandbox).map_err(|e| e.to_string())?;
        Ok(SandboxTriggers { sandbox, runner })
    }
}

impl TriggerMatcher for SandboxTriggers {
    fn decide(&self, m: &Message, p: &TriggerPersona) -> Option<Reason> {
        use sandbox::trigger::{Message as WMessage, Persona as WPersona, Reason as WReason};
        // Routing already matched the channel; the component sees it as subscribed.
        let persona = WPersona {
            name: p.name.clone(),
            mentions: p.triggers.mentions,
            keywords: p.triggers.keywords.clone(),
            all_messages: p.triggers.all_messages,
            subscribe: vec![m.channel.clone()],
        };
        let message = WMessage {
            id: m.id.to_hex(),
            channel: m.channel.clone(),
            author: m.author.to_hex(),
            text: m.content.clone(),
            mentions: if m.mentions.contains(&p.pubkey) {
                vec![p.name.clone()]
            } else {
                vec![]
            },
        };
        match self.runner.decide(self.sandbox, &persona, &message) {
            Ok(out) if out.value.wake => match out.value.reason {
                WReason::Mentioned => Some(Reason::Mention),
                WReason::Keyword(k) => Some(Reason::Keyword(k)),
                WReason::AllMessages => Some(Reason::AllMessages),
                WReason::NotSubscribed | WReason::NoMatch => None,
            },
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(persona = %p.name, "trigger component failed (not woken): {e}");
                None
            }
        }
    }

    fn name(&self) -> &str {
        sandbox::trigger::DEFAULT_NAME
    }
}

/// `.wasm` hooks in the sandbox; script hooks skipped with a warning.
pub struct SandboxHooks {
    /// Pack roots by pack id, to find hook files.
    roots: HashMap<String, PathBuf>,
    runners: Mutex<HashMap<PathBuf, Arc<sandbox::hook::HookRunner>>>,
}

impl SandboxHooks {
    pub fn new(roots: HashMap<String, PathBuf>) -> SandboxHooks {
        SandboxHooks {
            roots,
            runners: Mutex::new(HashMap::new()),
        }
    }

    fn runner(&self, file: &Path) -> Result<Arc<sandbox::hook::HookRunner>, String> {
        let mut runners = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = runners.get(file) {
            return Ok(Arc::clone(r));
        }
        let sb = Sandbox::shared()?;
        let bytes = crate::pack::source::read_limited(file, MAX_HOOK_FILE)?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = sb.load(&name, &bytes).map_err(|e| e.to_string())?;
        let runner = Arc::new(sandbox::hook::HookRunner::new(loaded).map_err(|e| e.to_string())?);
        runners.insert(file.to_path_buf(), Arc::clone(&runner));
        Ok(runner)
    }
}

impl HookRunner for SandboxHooks {
    fn run(
        &self,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&Message>,
    ) -> Result<(), String> {
        let hooks = &persona.hooks;
        let hook = match point {
            HookPoint::OnStart => &hooks.on_start,
            HookPoint::OnStop => &hooks.on_stop,
            HookPoint::OnMessage => &hooks.on_message,
        };
        let Some(hook) = hook else { return Ok(()) };
        let Some(root) = self.roots.get(pack_id) else {
            return Err(format!("pack {pack_id} is not known to the hook runner"));
        };
        let file = crate::pack::paths::resolve_inside(root, hook)
            .map_err(|e| format!("hook `{hook}`: {e}"))?;
        if file.extension().and_then(|e| e.to_str()) != Some("wasm") {
            if point == HookPoint::OnStart {
                tracing::warn!(
                    persona = %persona.identity.name,
                    "script hook `{hook}` not run: the live harness runs only sandboxed .wasm hooks"
                );
            }
            return Ok(());
        }
        let runner = self.runner(&file)?;
        let sb = Sandbox::shared()?;
        let msg = message.map(|m| sandbox::hook::HookMessage {
            id: m.id.to_hex(),
            channel: m.channel.clone(),
            thread: m.root.map(|r| r.to_hex()),
            author: m.author.to_hex(),
            text: m.content.clone(),
        });
        let point = match point {
            HookPoint::OnStart => sandbox::hook::HookPoint::OnStart,
            HookPoint::OnStop => sandbox::hook::HookPoint::OnStop,
            HookPoint::OnMessage => sandbox::hook::HookPoint::OnMessage,
        };
        runner
            .run(
                sb,
                point,
                pack_id,
                &persona.identity.name,
                msg.as_ref(),
                workspace,
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
