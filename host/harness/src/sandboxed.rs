//! The dispatcher's trigger matcher and hook runner backed by the sandbox (issue 3): the built-in
//! `trigger-default` component decides wakes; `.wasm` hooks run as sandboxed components with the
//! persona's workspace preopened. Script hooks run on the host (see [`super::script`]), so only when
//! the operator trusted them: the caller hands in a [`ScriptTrust`] (`apiary up` builds it from the
//! operator's trust store, which records trust for a pack's location, manifest id and version, the
//! file's digest and the command line), or trusts all of them with `apiary up --trust-hooks`.
//! Untrusted ones are reported once (an `untrusted` note) and skipped.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::hooks::{HookError, HookPoint, HookRunner};
use super::trigger::{Reason, TriggerError, TriggerMatcher, TriggerPersona};
use crate::relay::Message;
use crate::resolve::ResolvedPersona;
use crate::sandbox::trigger::TriggerRunner;
use crate::sandbox::{self, Capabilities, Sandbox, SandboxError};

/// A hook component larger than this is refused before it is read whole.
const MAX_HOOK_FILE: u64 = 64 * 1024 * 1024;

/// Whether a pack's script hook may run on this host. The caller builds it (`apiary up` from the
/// operator's trust store), so the dispatcher decides nothing about trust itself.
pub trait ScriptTrust: Send + Sync {
    /// `Ok` when the script hook `command` of pack `pack_id` may run.
    fn script_hook(&self, pack_id: &str, command: &str) -> Result<(), Untrusted>;

    /// The capabilities the operator granted the component hook `hook` of `pack_id` with the
    /// file's current digest (`apiary trust --hooks`); none by default.
    fn component_grants(&self, _pack_id: &str, _hook: &str) -> Vec<String> {
        Vec::new()
    }

    /// A pack was installed, upgraded (`Some`) or uninstalled (`None`) while `up` runs: trust is
    /// decided for the version now on disk, never inherited from the one before.
    fn pack_changed(&self, _pack_id: &str, _pack: Option<&crate::pack::Pack>) {}
}

/// Why a script hook may not run, and the command that would trust it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    pub why: String,
    pub remedy: String,
}

impl Untrusted {
    /// The remedy that needs no trust store.
    pub const TRUST_ALL: &'static str = "apiary up --trust-hooks";
}

/// Where the harness's components run. The caller provides it: `apiary up` hands in the process's
/// shared sandbox (compiling into the operator's cache) and the `trigger-default` component built
/// into its binary; the harness holds no component bytes and picks no cache directory itself.
pub trait SandboxSource: Send + Sync {
    /// The sandbox every hook and trigger component runs in (made on first use).
    fn sandbox(&self) -> Result<&'static Sandbox, SandboxError>;

    /// The trigger matcher that decides wakes, loaded into `sandbox`.
    fn trigger_matcher(&self, sandbox: &Sandbox) -> Result<TriggerRunner, SandboxError>;
}

/// Triggers decided by the source's trigger component (`trigger-default` for `apiary up`).
pub struct SandboxTriggers {
    sandbox: &'static Sandbox,
    runner: TriggerRunner,
}

impl SandboxTriggers {
    pub fn new(source: &dyn SandboxSource) -> Result<SandboxTriggers, TriggerError> {
        let sandbox = source.sandbox()?;
        let runner = source.trigger_matcher(sandbox)?;
        Ok(SandboxTriggers { sandbox, runner })
    }
}

impl SandboxTriggers {
    /// One persona's decision; `Err` when the component failed.
    fn decide_one(&self, m: &Message, p: &TriggerPersona) -> Result<Option<Reason>, TriggerError> {
        use sandbox::trigger::{Message as WMessage, Persona as WPersona, Reason as WReason};
        // Routing already matched the channel; the component sees it as subscribed.
        let persona = WPersona {
            name: p.qualified().to_string(),
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
                vec![persona.name.clone()]
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
            Err(e) => Err(e.into()),
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
    ) -> Result<Vec<Option<Reason>>, TriggerError> {
        use sandbox::trigger::{Message as WMessage, Persona as WPersona, WakeReason};
        if personas.len() < 2 {
            return personas.iter().map(|p| self.decide_one(m, p)).collect();
        }
        let wpersonas: Vec<WPersona> = personas
            .iter()
            .map(|p| WPersona {
                name: p.qualified().to_string(),
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
                .zip(&wpersonas)
                .filter(|(p, _)| m.mentions.contains(&p.pubkey))
                .map(|(_, w)| w.name.clone())
                .collect(),
        };
        let wakes =
            self.runner
                .decide_batch(self.sandbox, &wpersonas, std::slice::from_ref(&message))?;
        let mut out = vec![None; personas.len()];
        for w in wakes.value {
            // The runner checked the indexes; the keyword's index names the configured keyword.
            let keywords = &personas[w.persona as usize].triggers.keywords;
            out[w.persona as usize] = Some(match w.reason {
                WakeReason::Mentioned => Reason::Mention,
                WakeReason::Keyword(i) => Reason::Keyword(keywords[i as usize].clone()),
                WakeReason::AllMessages => Reason::AllMessages,
            });
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

/// What a hook that succeeded printed, and how long it took.
#[derive(Debug, Default)]
pub struct HookOutput {
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// `.wasm` hooks in the sandbox; script hooks on the host when trusted, else skipped and reported.
pub struct SandboxHooks {
    /// Where `.wasm` hooks run.
    source: Arc<dyn SandboxSource>,
    /// Pack roots by pack id, to find hook files (changed by a hot reload).
    roots: std::sync::RwLock<HashMap<String, PathBuf>>,
    runners: Mutex<HashMap<PathBuf, Arc<sandbox::hook::HookRunner>>>,
    /// `--trust-hooks`: every script hook runs.
    trust_all_scripts: bool,
    /// Which script hooks the operator trusts (`None`: none).
    trust: Option<Box<dyn ScriptTrust>>,
    /// Where an untrusted hook is reported (`up`'s notes).
    out: Option<super::Out>,
    /// Untrusted script hooks already reported (pack, persona, command).
    warned: Mutex<HashSet<(String, String, String)>>,
}

impl SandboxHooks {
    /// Hook runner for packs by id; without [`SandboxHooks::with_trust`] no script hook is trusted.
    pub fn new(roots: HashMap<String, PathBuf>, source: Arc<dyn SandboxSource>) -> SandboxHooks {
        SandboxHooks {
            source,
            roots: std::sync::RwLock::new(roots),
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

    /// Runs a script hook only when `trust` trusts it.
    pub fn with_trust(mut self, trust: impl ScriptTrust + 'static) -> SandboxHooks {
        self.trust = Some(Box::new(trust));
        self
    }

    /// Reports untrusted hooks as `untrusted` notes too.
    pub fn report_to(mut self, out: super::Out) -> SandboxHooks {
        self.out = Some(out);
        self
    }

    /// `Err` when the script hook `hook` of `pack_id` is not trusted.
    fn script_trusted(&self, pack_id: &str, hook: &str) -> Result<(), Untrusted> {
        if self.trust_all_scripts {
            return Ok(());
        }
        let Some(trust) = &self.trust else {
            return Err(Untrusted {
                why: "no trust store is configured".into(),
                remedy: Untrusted::TRUST_ALL.into(),
            });
        };
        trust.script_hook(pack_id, hook)
    }

    /// A script hook, run when trusted: an untrusted one is [`HookError::Untrusted`], not run.
    fn run_script(
        &self,
        call: &Call<'_>,
        root: &Path,
        hook: &str,
    ) -> Result<HookOutput, HookError> {
        let (point, name) = (call.point, &call.persona.identity.name);
        self.script_trusted(call.pack_id, hook)
            .map_err(|Untrusted { why, remedy }| HookError::Untrusted {
                hook: hook.to_string(),
                why,
                remedy,
            })?;
        let env = script_env(call.persona, call.pack_id, call.workspace);
        let run = super::script::ScriptRun {
            pack_root: root,
            command: hook,
            workspace: call.workspace,
            env: &env,
            stdin: call.message.map(|m| m.text.as_str()),
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
            .map(|o| HookOutput {
                stdout: o.stdout,
                stderr: o.stderr,
                elapsed: o.elapsed,
            })
            .map_err(|source| HookError::Script {
                hook: hook.to_string(),
                source,
            })
    }

    /// Reports an untrusted script hook, once per (pack, persona, command).
    fn report_untrusted(&self, call: &Call<'_>, hook: &str, untrusted: Untrusted) {
        let (point, pack_id, name) = (call.point, call.pack_id, &call.persona.identity.name);
        let Untrusted { why, remedy } = untrusted;
        let key = (pack_id.to_string(), name.clone(), hook.to_string());
        if !self
            .warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            return;
        }
        let help = format!("review it, then `{remedy}` or `apiary up --trust-hooks`");
        tracing::warn!(
            persona = %name,
            "script hook `{hook}` ({}) not run: it is not trusted ({why}); {help}",
            point.as_str()
        );
        if let Some(out) = &self.out {
            let text = format!(
                "untrusted {name} hook {} ({}): not run: {why}; {help}",
                apiary_core::shell::quote(hook),
                point.as_str()
            );
            out(super::Note::new(
                super::event::Event::Untrusted {
                    persona: name.to_string(),
                    pack: pack_id.to_string(),
                    kind: "hook".into(),
                    name: point.as_str().into(),
                    command: hook.to_string(),
                    reason: why.to_string(),
                    help: Some(help),
                },
                text,
            ));
        }
    }

    /// What the component hook gets beyond its world: what its `.caps.toml` declares, all of
    /// which the operator must have granted (else it is refused at load, naming what is not).
    fn capabilities(
        &self,
        pack_id: &str,
        hook: &str,
        file: &Path,
    ) -> Result<Capabilities, HookError> {
        let declared =
            Capabilities::declared_by(file).map_err(|e| HookError::Setup(e.to_string()))?;
        if declared.is_empty() {
            return Ok(declared);
        }
        let granted = self
            .trust
            .as_ref()
            .map(|t| t.component_grants(pack_id, hook))
            .unwrap_or_default();
        let granted =
            Capabilities::parse_all(&granted).map_err(|e| HookError::Setup(e.to_string()))?;
        let missing = declared.minus(&granted);
        if !missing.is_empty() {
            return Err(HookError::Setup(format!(
                "hook `{hook}` declares {missing}, which the operator has not granted for this file; review and grant it with `apiary trust <pack> --hooks`"
            )));
        }
        Ok(declared)
    }

    fn runner(
        &self,
        pack_id: &str,
        hook: &str,
        file: &Path,
    ) -> Result<Arc<sandbox::hook::HookRunner>, HookError> {
        let cached = |runners: &Mutex<HashMap<PathBuf, Arc<sandbox::hook::HookRunner>>>| {
            let runners = runners.lock().unwrap_or_else(|e| e.into_inner());
            runners.get(file).map(Arc::clone)
        };
        if let Some(r) = cached(&self.runners) {
            return Ok(r);
        }
        // Compiled without holding the lock: one slow compilation must not stall the hooks of
        // every other persona (two personas loading one file at once compile it once each).
        let sb = self
            .source
            .sandbox()
            .map_err(|e| HookError::Setup(e.to_string()))?;
        let bytes = crate::pack::source::read_limited(file, MAX_HOOK_FILE)
            .map_err(|e| HookError::Read(e.to_string()))?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let caps = self.capabilities(pack_id, hook, file)?;
        if !sb.is_compiled(&bytes) {
            self.report_compiling(pack_id, hook, bytes.len() as u64);
        }
        let loaded = sb.load(&name, &bytes)?;
        if let sandbox::Provenance::Compiled { time } = loaded.provenance {
            tracing::info!(
                pack = pack_id,
                hook,
                "compiled in {:.1} s",
                time.as_secs_f64()
            );
        }
        let runner = Arc::new(sandbox::hook::HookRunner::new(loaded)?.with_capabilities(caps));
        let mut runners = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Arc::clone(
            runners.entry(file.to_path_buf()).or_insert(runner),
        ))
    }

    /// Says that a hook component is being compiled (not in the compile cache yet), which can take
    /// a minute for a big one, and how to compile it ahead.
    fn report_compiling(&self, pack_id: &str, hook: &str, bytes: u64) {
        let deadline = super::hooks::load_deadline(bytes).as_secs();
        let mb = bytes as f64 / 1e6;
        let text = format!(
            "compiling {pack_id} hook {hook} ({mb:.1} MB; not in the compile cache yet, allowed {deadline} s); `apiary trust <pack> --hooks` compiles it ahead"
        );
        tracing::info!("{text}");
        if let Some(out) = &self.out {
            let compiling = super::event::Event::Compiling {
                pack: pack_id.to_string(),
                hook: hook.to_string(),
                bytes,
                deadline_secs: deadline,
            };
            out(super::Note::new(compiling, text));
        }
    }

    /// The bytes of the persona's component hooks that must be compiled before they run (not
    /// loaded in this process, not in the compile cache). An unreadable file counts as nothing:
    /// loading it reports the error.
    fn uncompiled_bytes(&self, pack_id: &str, persona: &ResolvedPersona) -> u64 {
        let (Ok(root), Ok(sb)) = (self.root(pack_id), self.source.sandbox()) else {
            return 0;
        };
        let mut files: Vec<PathBuf> = [HookPoint::OnStart, HookPoint::OnMessage, HookPoint::OnStop]
            .into_iter()
            .filter_map(|point| Self::wasm_file(&root, hook_for(persona, point)?)?.ok())
            .collect();
        files.sort();
        files.dedup();
        files
            .iter()
            .filter_map(|file| crate::pack::source::read_limited(file, MAX_HOOK_FILE).ok())
            .filter(|bytes| !sb.is_compiled(bytes))
            .map(|bytes| bytes.len() as u64)
            .sum()
    }

    /// The component file of a `.wasm` hook (`None`: a script hook).
    fn wasm_file(root: &Path, hook: &str) -> Option<Result<PathBuf, HookError>> {
        is_component(hook).then(|| {
            crate::pack::paths::resolve_inside(root, hook)
                .map_err(|e| HookError::Path(format!("hook `{hook}`: {e}")))
        })
    }

    /// The file `hook` of pack `pack_id` runs (a component, or a script's first word), as the
    /// runner resolves it: inside the pack, never through a link out of it.
    pub fn hook_file(&self, pack_id: &str, hook: &str) -> Result<PathBuf, HookError> {
        let root = self.root(pack_id)?;
        match Self::wasm_file(&root, hook) {
            Some(file) => file,
            None => super::script::script_file(&root, hook).map_err(|source| HookError::Script {
                hook: hook.to_string(),
                source,
            }),
        }
    }

    fn root(&self, pack_id: &str) -> Result<PathBuf, HookError> {
        self.roots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(pack_id)
            .cloned()
            .ok_or_else(|| HookError::UnknownPack(pack_id.to_string()))
    }

    /// Compiles the component of the persona's hook for `point` (nothing to do for a script hook,
    /// or none).
    pub fn prepare_point(
        &self,
        pack_id: &str,
        persona: &ResolvedPersona,
        point: HookPoint,
    ) -> Result<(), HookError> {
        let Some(hook) = hook_for(persona, point) else {
            return Ok(());
        };
        match Self::wasm_file(&self.root(pack_id)?, hook) {
            Some(file) => self.runner(pack_id, hook, &file?).map(drop),
            None => Ok(()),
        }
    }

    /// Runs the persona's hook for `point` once: `Ok(None)` when it has none. An untrusted script
    /// hook is [`HookError::Untrusted`], not reported: [`HookRunner::run`] reports it for the
    /// harness. `message` is the `on_message` hook's message (its text is a script's stdin).
    pub fn call(
        &self,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<&sandbox::hook::HookMessage>,
    ) -> Result<Option<HookOutput>, HookError> {
        self.call_one(&Call {
            point,
            pack_id,
            persona,
            workspace,
            message,
        })
    }

    fn call_one(&self, call: &Call<'_>) -> Result<Option<HookOutput>, HookError> {
        let Some(hook) = hook_for(call.persona, call.point) else {
            return Ok(None);
        };
        let root = self.root(call.pack_id)?;
        let Some(file) = Self::wasm_file(&root, hook) else {
            return self.run_script(call, &root, hook).map(Some);
        };
        let runner = self.runner(call.pack_id, hook, &file?)?;
        let sb = self
            .source
            .sandbox()
            .map_err(|e| HookError::Setup(e.to_string()))?;
        let out = runner.run(
            sb,
            call.point,
            call.pack_id,
            &call.persona.identity.name,
            call.message,
            call.workspace,
        )?;
        Ok(Some(HookOutput {
            stdout: out.stdout.text,
            stderr: out.stderr.text,
            elapsed: out.elapsed,
        }))
    }

    /// Runs the persona's hook for `point` once, outside the live harness but as it would
    /// (`apiary hook run`): off this thread, loading within [`HookRunner::load_deadline`], the
    /// call within [`HookRunner::deadline`] plus [`RUN_ONCE_GRACE`].
    pub fn run_once(
        self: &Arc<Self>,
        point: HookPoint,
        pack_id: &str,
        persona: &ResolvedPersona,
        workspace: &Path,
        message: Option<sandbox::hook::HookMessage>,
    ) -> Result<Option<HookOutput>, HookError> {
        use super::hooks::{LOAD_DEADLINE, off_async};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| HookError::Setup(format!("cannot start the async runtime: {e}")))?;
        let deadline = self.deadline(point, persona) + RUN_ONCE_GRACE;
        let (h, id, p, ws) = (
            Arc::clone(self),
            pack_id.to_string(),
            persona.clone(),
            workspace.to_path_buf(),
        );
        let result = rt.block_on(async move {
            let (h2, id2, p2) = (Arc::clone(&h), id.clone(), p.clone());
            let load = off_async("checking the hook", LOAD_DEADLINE, move || {
                Ok(h2.load_deadline(&id2, &p2))
            })
            .await?;
            let (h2, id2, p2) = (Arc::clone(&h), id.clone(), p.clone());
            off_async(super::hooks::load_what(load), load, move || {
                h2.prepare_point(&id2, &p2, point)
            })
            .await?;
            off_async(point.as_str(), deadline, move || {
                h.call(point, &id, &p, &ws, message.as_ref())
            })
            .await
        });
        // A call abandoned past its deadline may still hold a blocking thread: not waited for.
        rt.shutdown_background();
        result
    }
}

/// Beyond the runner's deadline, how long `run_once` waits: the hook's own deadline (the
/// component's epoch, the script's kill) fires first and says what happened.
pub const RUN_ONCE_GRACE: Duration = Duration::from_secs(5);

/// One call of a hook, as [`SandboxHooks::call`] and [`HookRunner::run`] get it.
struct Call<'a> {
    point: HookPoint,
    pack_id: &'a str,
    persona: &'a ResolvedPersona,
    workspace: &'a Path,
    /// The `on_message` hook's message, as the hook is told about it.
    message: Option<&'a sandbox::hook::HookMessage>,
}

/// A script hook's environment on top of the inherited one, as the agent's (spec §9): the
/// persona's projected env and apiary's variables.
fn script_env(persona: &ResolvedPersona, pack_id: &str, workspace: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = persona
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.push(("APIARY_PERSONA".into(), persona.identity.name.clone()));
    env.push(("APIARY_PACK".into(), pack_id.to_string()));
    env.push(("AGENT_CWD".into(), workspace.display().to_string()));
    env
}

/// The hook configured for `point`.
pub fn hook_for(persona: &ResolvedPersona, point: HookPoint) -> Option<&String> {
    let hooks = &persona.hooks;
    match point {
        HookPoint::OnStart => hooks.on_start.as_ref(),
        HookPoint::OnStop => hooks.on_stop.as_ref(),
        HookPoint::OnMessage => hooks.on_message.as_ref(),
    }
}

/// Whether a hook is a sandboxed component (else a script, run on the host).
pub fn is_component(hook: &str) -> bool {
    hook.trim_end().ends_with(".wasm")
}

/// The message as an `on_message` hook is told about it.
fn hook_message(m: &Message) -> sandbox::hook::HookMessage {
    sandbox::hook::HookMessage {
        id: m.id.to_hex(),
        channel: m.channel.clone(),
        thread: m.root.map(|r| r.to_hex()),
        author: m.author.to_hex(),
        author_name: None,
        text: m.content.clone(),
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
    ) -> Result<(), HookError> {
        let message = message.map(hook_message);
        let call = Call {
            point,
            pack_id,
            persona,
            workspace,
            message: message.as_ref(),
        };
        match self.call_one(&call) {
            Ok(_) => Ok(()),
            // Skipped, not failed: the persona runs without it.
            Err(HookError::Untrusted { hook, why, remedy }) => {
                self.report_untrusted(&call, &hook, Untrusted { why, remedy });
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Compiles every `.wasm` hook of the persona (script hooks have nothing to load).
    fn prepare(&self, pack_id: &str, persona: &ResolvedPersona) -> Result<(), HookError> {
        if self.root(pack_id).is_err() {
            return Ok(());
        }
        for point in [HookPoint::OnStart, HookPoint::OnMessage, HookPoint::OnStop] {
            self.prepare_point(pack_id, persona, point)
                .map_err(|e| match e {
                    // Names the hook already.
                    HookError::Path(_) => e,
                    e => {
                        let hook = hook_for(persona, point).map_or("", String::as_str);
                        HookError::Failed(format!("{} hook `{hook}`: {e}", point.as_str()))
                    }
                })?;
        }
        Ok(())
    }

    fn load_deadline(&self, pack_id: &str, persona: &ResolvedPersona) -> Duration {
        super::hooks::load_deadline(self.uncompiled_bytes(pack_id, persona))
    }

    fn deadline(&self, point: HookPoint, persona: &ResolvedPersona) -> Duration {
        let wasm = hook_for(persona, point).is_some_and(|h| is_component(h));
        match point {
            HookPoint::OnMessage => super::hooks::ON_MESSAGE_DEADLINE,
            _ if wasm => sandbox::Limits::hook().deadline + WASM_SLACK,
            _ => SCRIPT_LIFECYCLE_DEADLINE + SCRIPT_SLACK,
        }
    }

    /// The pack's hooks are found in its new root, compiled afresh (a file of the same path may
    /// hold another version now), and trusted as the trust store says of the new version.
    fn pack_changed(&self, pack_id: &str, pack: Option<&crate::pack::Pack>) {
        let old = {
            let mut roots = self.roots.write().unwrap_or_else(|e| e.into_inner());
            match pack {
                Some(p) => roots.insert(pack_id.to_string(), p.root.clone()),
                None => roots.remove(pack_id),
            }
        };
        let mut runners = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        runners.retain(|file, _| {
            let under = |root: &Path| file.starts_with(root);
            !(old.as_deref().is_some_and(under) || pack.is_some_and(|p| under(&p.root)))
        });
        drop(runners);
        if let Some(trust) = &self.trust {
            trust.pack_changed(pack_id, pack);
        }
    }
}
