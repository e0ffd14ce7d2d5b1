//! The converters available to `apiary convert`: the built-in ones embedded in the binary (built
//! from `guests/converter-*` by build.rs) and the ones the operator added (`apiary component add`).
//! Each is loaded, asked for its `info`, and checked; one that fails to load is listed as
//! unavailable with the reason, never used. A built-in whose `info` is known from an earlier run
//! (the info cache, by the digest build.rs computed) is loaded only when a conversion uses it:
//! converting one plugin then loads one component, not all of them.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Serialize;

use super::info::checked_conversions;
use super::store::{Entry, Store};
use crate::sandbox::converter::ConverterRunner;
use crate::sandbox::{Capabilities, Sandbox, SandboxError};

/// `(guest crate name, component bytes, SHA-256)` for each built-in converter that was built.
pub const BUILTIN: &[(&str, &[u8], &str)] = crate::builtin::CONVERTERS;

/// Where a converter comes from.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    BuiltIn,
    Added { source: PathBuf },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::BuiltIn => f.write_str("built in"),
            Origin::Added { .. } => f.write_str("added"),
        }
    }
}

/// A loaded converter and what it says it can do.
pub struct Converter {
    /// The built-in crate name, or the name it was added under.
    pub name: String,
    pub origin: Origin,
    pub digest: String,
    pub version: String,
    /// `(source, target)` pairs, checked.
    pub conversions: Vec<(String, String)>,
    runner: OnceLock<ConverterRunner>,
    /// What loads a built-in on first use (`None`: loaded when the registry was).
    lazy: Option<Lazy>,
}

/// A built-in not loaded yet: its bytes and the deadline its runner gets.
struct Lazy {
    label: String,
    bytes: &'static [u8],
    deadline: Option<Duration>,
}

impl Converter {
    /// The loaded component (a built-in is loaded on first use).
    pub fn runner(&self, sandbox: &Sandbox) -> Result<&ConverterRunner, SandboxError> {
        if let Some(r) = self.runner.get() {
            return Ok(r);
        }
        let Some(lazy) = &self.lazy else {
            unreachable!("a converter without a lazy source is loaded with the registry")
        };
        let loaded = sandbox.load_digested(&lazy.label, lazy.bytes, &self.digest)?;
        let runner = with_deadline(ConverterRunner::new(loaded)?, lazy.deadline);
        Ok(self.runner.get_or_init(|| runner))
    }

    pub fn converts(&self, source: &str, target: &str) -> bool {
        self.conversions
            .iter()
            .any(|(s, t)| s == source && t == target)
    }

    pub fn reads(&self, source: &str) -> bool {
        self.conversions.iter().any(|(s, _)| s == source)
    }
}

/// A converter that could not be used, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Unavailable {
    pub name: String,
    pub origin: Origin,
    pub reason: String,
}

/// Every converter, built-ins first (in build order), then added ones by name.
#[derive(Default)]
pub struct Registry {
    pub converters: Vec<Converter>,
    pub unavailable: Vec<Unavailable>,
}

impl Registry {
    /// Loads the built-ins and, with a store, the added converters. `deadline` overrides the
    /// converter per-call deadline.
    pub fn load(sandbox: &Sandbox, store: Option<&Store>, deadline: Option<Duration>) -> Registry {
        let mut reg = Registry::default();
        for (name, bytes, digest) in BUILTIN {
            let label = format!("{name} (built in)");
            if let Some((version, conversions)) = info_cache::get(sandbox, digest) {
                reg.converters.push(Converter {
                    name: name.to_string(),
                    origin: Origin::BuiltIn,
                    digest: digest.to_string(),
                    version,
                    conversions,
                    runner: OnceLock::new(),
                    lazy: Some(Lazy {
                        label,
                        bytes,
                        deadline,
                    }),
                });
                continue;
            }
            let no_grants = (deadline, Capabilities::none());
            reg.admit(sandbox, (name, &label), Origin::BuiltIn, bytes, no_grants);
        }
        let Some(store) = store else {
            return reg;
        };
        let entries = match store.list() {
            Ok(e) => e,
            Err(reason) => {
                reg.unavailable.push(Unavailable {
                    name: "(component registry)".to_string(),
                    origin: Origin::Added {
                        source: store.dir().to_path_buf(),
                    },
                    reason: reason.to_string(),
                });
                return reg;
            }
        };
        for entry in entries {
            reg.admit_added(sandbox, store, &entry, deadline);
        }
        reg
    }

    fn admit_added(
        &mut self,
        sandbox: &Sandbox,
        store: &Store,
        entry: &Entry,
        deadline: Option<Duration>,
    ) {
        let origin = Origin::Added {
            source: entry.source.clone(),
        };
        if self.converters.iter().any(|c| c.name == entry.name) {
            let reason = "a built-in converter has the same name";
            return self.refuse(&entry.name, origin, reason);
        }
        let grants = match entry.capabilities() {
            Ok(g) => g,
            Err(reason) => return self.refuse(&entry.name, origin, reason),
        };
        match store.bytes(entry) {
            Ok(bytes) => self.admit(
                sandbox,
                (&entry.name, &entry.name),
                origin,
                &bytes,
                (deadline, grants),
            ),
            Err(reason) => self.refuse(&entry.name, origin, reason),
        }
    }

    /// Loads one converter with an optional deadline and the capabilities recorded for it.
    fn admit(
        &mut self,
        sandbox: &Sandbox,
        (name, label): (&str, &str),
        origin: Origin,
        bytes: &[u8],
        (deadline, grants): (Option<Duration>, Capabilities),
    ) {
        let loaded = sandbox
            .load(label, bytes)
            .and_then(ConverterRunner::new)
            .map(|r| with_deadline(r, deadline).with_capabilities(grants));
        let runner = match loaded {
            Ok(r) => r,
            Err(e) => return self.refuse(name, origin, e),
        };
        // Computed once by the sandbox when it loaded the bytes.
        let digest = runner.loaded().digest.clone();
        let known = match info_cache::get(sandbox, &digest) {
            Some(k) => k,
            None => {
                let info = match runner.info(sandbox) {
                    Ok(out) => out.value,
                    Err(e) => return self.refuse(name, origin, e),
                };
                let conversions = match checked_conversions(&info) {
                    Ok(c) => c,
                    Err(e) => return self.refuse(name, origin, e),
                };
                let version = crate::sandbox::truncate(&info.version, 64).to_string();
                info_cache::put(sandbox, &digest, (version, conversions))
            }
        };
        let (version, conversions) = known;
        self.converters.push(Converter {
            name: name.to_string(),
            origin,
            digest,
            version,
            conversions,
            runner: OnceLock::from(runner),
            lazy: None,
        });
    }

    /// Lists `name` as unavailable, with why.
    fn refuse(&mut self, name: &str, origin: Origin, reason: impl std::fmt::Display) {
        self.unavailable.push(Unavailable {
            name: name.to_string(),
            origin,
            reason: reason.to_string(),
        });
    }

    pub fn get(&self, name: &str) -> Option<&Converter> {
        self.converters.iter().find(|c| c.name == name)
    }

    /// Every format some converter reads.
    pub fn sources(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .converters
            .iter()
            .flat_map(|c| c.conversions.iter().map(|(s, _)| s.as_str()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Every format some converter writes.
    pub fn targets(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .converters
            .iter()
            .flat_map(|c| c.conversions.iter().map(|(_, t)| t.as_str()))
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

fn with_deadline(r: ConverterRunner, deadline: Option<Duration>) -> ConverterRunner {
    match deadline {
        Some(d) => r.with_deadline(d),
        None => r,
    }
}

/// What a converter's `info` said (version, checked conversions), by component digest: `info`
/// depends only on the component's bytes, so every `apiary convert` after the first takes it
/// from here instead of instantiating each converter to ask. Kept in memory for the process and
/// as one small JSON file per digest beside the compile cache (which holds the compiled code of
/// the same digest, so it is trusted as much); a file that does not read back as valid answers
/// is ignored and the converter asked again.
mod info_cache {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Mutex;

    use crate::convert::info::valid_format;
    use crate::sandbox::Sandbox;

    /// The version and the `(source, target)` conversions.
    pub type Known = (String, Vec<(String, String)>);

    static MEMORY: Mutex<Option<HashMap<String, Known>>> = Mutex::new(None);

    fn file(sandbox: &Sandbox, digest: &str) -> Option<PathBuf> {
        let ok = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
        let dir = sandbox.cache().dir()?;
        ok.then(|| dir.join(format!("converter-info-{digest}.json")))
    }

    pub fn get(sandbox: &Sandbox, digest: &str) -> Option<Known> {
        let memory = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = memory.as_ref().and_then(|m| m.get(digest)) {
            return Some(k.clone());
        }
        drop(memory);
        let text = std::fs::read_to_string(file(sandbox, digest)?).ok()?;
        let known: Known = serde_json::from_str(&text).ok()?;
        let sane = known.0.len() <= 64
            && known
                .1
                .iter()
                .all(|(s, t)| valid_format(s) && valid_format(t) && s != t);
        sane.then(|| remember(digest, known.clone()));
        sane.then_some(known)
    }

    /// Records `known` for `digest` (on disk best effort: a read-only cache only costs a call).
    pub fn put(sandbox: &Sandbox, digest: &str, known: Known) -> Known {
        if let Some(path) = file(sandbox, digest)
            && let Ok(text) = serde_json::to_string(&known)
        {
            // Written beside, then renamed: a concurrent reader sees all of it or nothing.
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &path).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        remember(digest, known.clone());
        known
    }

    fn remember(digest: &str, known: Known) {
        let mut memory = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
        memory
            .get_or_insert_with(HashMap::new)
            .insert(digest.to_string(), known);
    }
}
