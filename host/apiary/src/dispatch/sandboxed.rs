//! The dispatcher's trigger matcher and hook runner backed by the sandbox (issue 3): the built-in
//! `trigger-default` component decides wakes; `.wasm` hooks run as sandboxed components with the
//! persona's workspace preopened. Script hooks run on the host (see [`super::script`]), so only when
//! the operator trusted them: recorded in the operator's trust store (`apiary trust`, see
//! [`crate::dist::trust`]) for this pack's location, manifest id and version, the file's digest and
//! the command line, or all of them with `apiary up --trust-hooks`. Untrusted ones are reported
//! once (an `untrusted` note) and skipped.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::hooks::{HookPoint, HookRunner};
use super::trigger::{Reason, TriggerMatcher, TriggerPersona};
use crate::dist::trust::{PackRef, TrustView};
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
        let sandbox = Sandbox::shared().map_err(|e| e.to_string())?;
        let runner = crate::builtin::trigger_matcher(sandbox).map_err(|e| e.to_string())?;
        Ok(SandboxTriggers { sandbox, runner })
    }
}

impl SandboxTriggers {
    /// One persona's decision; `Err` when the component failed.
    fn decide_one(&self, m: &Message, p: &TriggerPersona) -> Result<Option<Reason>, String> {
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
            Ok(out) if out.value.wake => Ok(match out.value.reason {
                WReason::Mentioned => Some(Reason::Mention),
                WReason::Keyword(k) => Some(Reason::Keyword(k)),
                WReason::AllMessages => Some(Reason::AllMessages),
                WReason::NotSubscribed | WReason::NoMatch => None,
            }),
            Ok(_) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl TriggerMatcher for SandboxTriggers {
    fn decide(&self, m: &Message, p: &TriggerPersona) -> Option<Reason> {
        self.decide_one(m, p).unwrap_or_else(|e| {
            tracing::warn!(persona = %p.name, "trigger component failed (not woken): {e}");
            None
        })
    }

    /// One component instance per event instead of one per (event, persona): each instance costs a
    /// fresh linear memory.
    fn decide_all(
        &self,
        m: &Message,
        personas: &[&TriggerPersona],
    ) -> Result<Vec<Option<Reason>>, String> {
        use sandbox::trigger::{Message as WMessage, Persona as WPersona, Reason as WReason};
        if personas.len() < 2 {
            return personas.iter().map(|p| self.decide_one(m, p)).collect();
        }
        let wpersonas: Vec<WPersona> = personas
            .iter()
            .map(|p| WPersona {
                name: p.name.clone(),
                mentions: p.triggers.mentions,
                keywords: p.triggers.keywords.clone(),
                all_messages: p.triggers.all_messages,
                subscribe: vec![m.channel.clone()],
            })
            .collect();
        let message = WMessage {
            id: m.id.to_hex(),
            channel: m.channel.clone(),
            author: m.author.to_hex(),
            text: m.content.clone(),
            mentions: personas
                .iter()
                .filter(|p| m.mentions.contains(&p.pubkey))
                .map(|p| p.name.clone())
                .collect(),
        };
        let mut out = vec![None; personas.len()];
        match self
            .runner
            .decide_batch(self.sandbox, &wpersonas, std::slice::from_ref(&message))
        {
            Ok(wakes) => {
                for w in wakes.value {
                    out[w.persona as usize] = match w.reason {
                        WReason::Mentioned => Some(Reason::Mention),
                        WReason::Keyword(k) => Some(Reason::Keyword(k)),
                        WReason::AllMessages => Some(Reason::AllMessages),
                        WReason::NotSubscribed | WReason::NoMatch => None,
                    };
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        Ok(out)
    }

    fn name(&self) -> &str {
        sandbox::trigger::DEFAULT_NAME
    }
}

/// A script `on_message` hook gets the spec's 5 s; `on_start` and `on_stop` have no deadline in the
/// spec (they may install things) but are still bounded, so a hung script cannot hold the harness.
const SCRIPT_MESSAGE_DEADLINE: Duration = Duration::from_secs(5);
const SCRIPT_LIFECYCLE_DEADLINE: Duration = Duration::from_secs(300);

/// `.wasm` hooks in the sandbox; script hooks on the host when trusted, else skipped and reported.
pub struct SandboxHooks {
    /// Pack roots by pack id, to find hook files.
    roots: HashMap<String, PathBuf>,
    runners: Mutex<HashMap<PathBuf, Arc<sandbox::hook::HookRunner>>>,
    /// `--trust-hooks`: every script hook runs.
    trust_all_scripts: bool,
    /// The operator's trust store, and each pack as trust sees it (manifest id and version, root).
    trust: Option<(TrustView, HashMap<String, PackRef>)>,
    /// Where an untrusted hook is reported (`up`'s notes).
    out: Option<super::Out>,
    /// Untrusted script hooks already reported (pack, persona, command).
    warned: Mutex<HashSet<(String, String, String)>>,
}

impl SandboxHooks {
    /// Hook runner for packs by id; without [`SandboxHooks::with_trust`] no script hook is trusted.
    pub fn new(roots: HashMap<String, PathBuf>) -> SandboxHooks {
        SandboxHooks {
            roots,
            runners: Mutex::new(HashMap::new()),
            trust_all_scripts: false,
            trust: None,
            out: None,
            warned: Mutex::new(HashSet::new()),
        }
    }

    /// Runs script hooks without asking the trust store (`apiary up --trust-hooks`).
    pub fn trust_all_scripts(mut self, yes: bool) -> SandboxHooks {
        self.trust_all_scripts = yes;
        self
    }

    /// Runs a script hook only when the operator's store `trust` trusts it for its pack in `packs`.
    pub fn with_trust(mut self, trust: TrustView, packs: &[PackRef]) -> SandboxHooks {
        let packs = packs.iter().map(|p| (p.id.clone(), p.clone())).collect();
        self.trust = Some((trust, packs));
        self
    }

    /// Reports untrusted hooks as `untrusted` notes too.
    pub fn report_to(mut self, out: super::Out) -> SandboxHooks {
        self.out = Some(out);
        self
    }

    /// `Err(why, remedy)` when the script hook `hook` of `pack_id` is not trusted.
    fn script_trusted(&self, pack_id: &str, hook: &str) -> Result<(), (String, String)> {
        if self.trust_all_scripts {
            return Ok(());
        }
        let Some((view, packs)) = &self.trust else {
            return Err((
                "no trust store is configured".into(),
                "apiary up --trust-hooks".into(),
            ));
        };
        let Some(pack) = packs.get(pack_id) else {
            return Err((
                format!("pack {pack_id} is not known to the trust check"),
                "apiary up --trust-hooks".into(),
            ));
        };
        view.hook(pack, hook)
            .map_err(|why| (why, view.remedy(pack)))
    }

    /// A script hook: run when trusted, else reported once and skipped.
    #[allow(clippy::too_many_arguments)]
    fn run_script(
        &self,
        point: HookPoint,
        pack_id: &str,
        root: &Path,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&Message>,
        hook: &str,
    ) -> Result<(), String> {
        let name = &persona.identity.name;
        if let Err((why, remedy)) = self.script_trusted(pack_id, hook) {
            let key = (pack_id.to_string(), name.clone(), hook.to_string());
            if self
                .warned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key)
            {
                let help = format!("review it, then `{remedy}` or `apiary up --trust-hooks`");
                tracing::warn!(
                    persona = %name,
                    "script hook `{hook}` ({}) not run: it is not trusted ({why}); {help}",
                    point.as_str()
                );
                if let Some(out) = &self.out {
                    out(super::Note::new(
                        "untrusted",
                        format!(
                            "untrusted {name} hook {} ({}): not run: {why}; {help}",
                            crate::dist::trust::quote(hook),
                            point.as_str()
                        ),
                    )
                    .with("persona", name.as_str())
                    .with("pack", pack_id)
                    .with("kind", "hook")
                    .with("name", point.as_str())
                    .with("command", hook)
                    .with("reason", why.as_str())
                    .with("help", help.as_str()));
                }
            }
            return Ok(());
        }
        // The agent's environment (spec §9): the persona's projected env and apiary's variables.
        let mut env: Vec<(String, String)> = persona
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.push(("APIARY_PERSONA".into(), name.clone()));
        env.push(("APIARY_PACK".into(), pack_id.to_string()));
        env.push(("AGENT_CWD".into(), workspace.display().to_string()));
        let run = super::script::ScriptRun {
            pack_root: root,
            command: hook,
            workspace,
            env: &env,
            stdin: message.map(|m| m.content.as_str()),
            deadline: if point == HookPoint::OnMessage {
                SCRIPT_MESSAGE_DEADLINE
            } else {
                SCRIPT_LIFECYCLE_DEADLINE
            },
        };
        let result = super::script::run(&run);
        match &result {
            Ok(o) => tracing::debug!(
                persona = %name, hook = %hook, point = point.as_str(),
                elapsed_ms = o.elapsed.as_secs_f64() * 1000.0,
                stdout = %o.stdout.trim_end(), stderr = %o.stderr.trim_end(),
                "script hook succeeded"
            ),
            Err(e) => {
                tracing::debug!(persona = %name, hook = %hook, point = point.as_str(), "script hook failed: {e}")
            }
        }
        result
            .map(|_| ())
            .map_err(|e| format!("script hook `{hook}`: {e}"))
    }

    fn runner(&self, file: &Path) -> Result<Arc<sandbox::hook::HookRunner>, String> {
        let cached = |runners: &Mutex<HashMap<PathBuf, Arc<sandbox::hook::HookRunner>>>| {
            let runners = runners.lock().unwrap_or_else(|e| e.into_inner());
            runners.get(file).map(Arc::clone)
        };
        if let Some(r) = cached(&self.runners) {
            return Ok(r);
        }
        // Compiled without holding the lock: one slow compilation must not stall the hooks of
        // every other persona (two personas loading one file at once compile it once each).
        let sb = Sandbox::shared().map_err(|e| e.to_string())?;
        let bytes =
            crate::pack::source::read_limited(file, MAX_HOOK_FILE).map_err(|e| e.to_string())?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let loaded = sb.load(&name, &bytes).map_err(|e| e.to_string())?;
        let runner = Arc::new(sandbox::hook::HookRunner::new(loaded).map_err(|e| e.to_string())?);
        let mut runners = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Arc::clone(
            runners.entry(file.to_path_buf()).or_insert(runner),
        ))
    }

    /// The component file of a `.wasm` hook (`None`: a script hook).
    fn wasm_file(root: &Path, hook: &str) -> Option<Result<PathBuf, String>> {
        hook.trim_end().ends_with(".wasm").then(|| {
            crate::pack::paths::resolve_inside(root, hook)
                .map_err(|e| format!("hook `{hook}`: {e}"))
        })
    }
}

/// The hook configured for `point`.
fn hook_for(persona: &ResolvedPersona, point: HookPoint) -> Option<&String> {
    let hooks = &persona.hooks;
    match point {
        HookPoint::OnStart => hooks.on_start.as_ref(),
        HookPoint::OnStop => hooks.on_stop.as_ref(),
        HookPoint::OnMessage => hooks.on_message.as_ref(),
    }
}

/// Beyond a component's own epoch deadline, the time its host side may take (opening the store,
/// WASI calls) before the dispatcher stops waiting.
const WASM_SLACK: Duration = Duration::from_secs(5);
/// Beyond a script's own deadline (which kills it), the time to collect its output.
const SCRIPT_SLACK: Duration = Duration::from_secs(5);

impl HookRunner for SandboxHooks {
    fn run(
        &self,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&Message>,
    ) -> Result<(), String> {
        let Some(hook) = hook_for(persona, point) else {
            return Ok(());
        };
        let Some(root) = self.roots.get(pack_id) else {
            return Err(format!("pack {pack_id} is not known to the hook runner"));
        };
        let Some(file) = Self::wasm_file(root, hook) else {
            return self.run_script(point, pack_id, root, persona, workspace, message, hook);
        };
        let runner = self.runner(&file?)?;
        let sb = Sandbox::shared().map_err(|e| e.to_string())?;
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

    /// Compiles every `.wasm` hook of the persona (script hooks have nothing to load).
    fn prepare(&self, pack_id: &str, persona: &ResolvedPersona) -> Result<(), String> {
        let Some(root) = self.roots.get(pack_id) else {
            return Ok(());
        };
        for point in [HookPoint::OnStart, HookPoint::OnMessage, HookPoint::OnStop] {
            let Some(hook) = hook_for(persona, point) else {
                continue;
            };
            if let Some(file) = Self::wasm_file(root, hook) {
                self.runner(&file?)
                    .map_err(|e| format!("{} hook `{hook}`: {e}", point.as_str()))?;
            }
        }
        Ok(())
    }

    fn deadline(&self, point: HookPoint, persona: &ResolvedPersona) -> Duration {
        let wasm = hook_for(persona, point).is_some_and(|h| h.trim_end().ends_with(".wasm"));
        match point {
            HookPoint::OnMessage => super::hooks::ON_MESSAGE_DEADLINE,
            _ if wasm => sandbox::Limits::hook().deadline + WASM_SLACK,
            _ => SCRIPT_LIFECYCLE_DEADLINE + SCRIPT_SLACK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::NativeTriggers;
    use crate::resolve::Triggers;
    use nostr_sdk::prelude::Keys;

    /// The one-instance-per-event path decides exactly as one call per persona (and as the native
    /// matcher), mentions by key and by name included.
    #[test]
    fn decide_all_matches_one_decision_per_persona() {
        let Ok(sandbox) = SandboxTriggers::builtin() else {
            eprintln!("trigger component not built; skipped");
            return;
        };
        let personas: Vec<TriggerPersona> = (0..4)
            .map(|i| TriggerPersona {
                name: format!("p{i}"),
                display_name: format!("P{i}"),
                pubkey: Keys::generate().public_key(),
                triggers: Triggers {
                    mentions: true,
                    keywords: vec![format!("topic{i}")],
                    all_messages: i == 3,
                },
            })
            .collect();
        let refs: Vec<&TriggerPersona> = personas.iter().collect();
        let author = Keys::generate();
        let by_key = vec![nostr_sdk::prelude::Tag::public_key(personas[1].pubkey)];
        for (text, tags) in [
            ("hello @p0", vec![]),
            ("news about topic2", vec![]),
            ("plain chatter", vec![]),
            ("for you", by_key),
        ] {
            let ev = crate::relay::message(&author, "general", text, tags).unwrap();
            let m = Message::parse(&ev).unwrap();
            let batch = sandbox.decide_all(&m, &refs).unwrap();
            let single: Vec<Option<Reason>> = refs.iter().map(|p| sandbox.decide(&m, p)).collect();
            let native = NativeTriggers.decide_all(&m, &refs).unwrap();
            assert_eq!(batch, single, "{text}");
            assert_eq!(batch, native, "{text}");
        }
    }
}
