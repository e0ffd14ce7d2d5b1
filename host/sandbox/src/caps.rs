//! Capabilities: what a component may use beyond its world's defaults. A component declares them
//! in a manifest beside its file (`<name>.caps.toml`), the operator grants them, and every call
//! gets the intersection ([`Capabilities::intersect`]).
//!
//! A manifest rather than a custom section: every toolchain can ship a text file beside its
//! output (componentize-py and componentize-js cannot add custom sections without a second tool),
//! the operator reads it before granting, and the hosts it names are usually the deployment's
//! (a webhook URL), not the author's. It is not bound to the bytes, so the grant is: it is
//! recorded with the component's digest, and a changed component has none.
//!
//! ```toml
//! http = ["hooks.example.com", "127.0.0.1:8080"]   # outbound HTTP(S) to these hosts
//! env = ["WEBHOOK_TOKEN"]                           # these environment variables, nothing else
//! read = ["/usr/share/zoneinfo"]                    # these directories, read-only, same path
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// One capability, written `http:HOST[:PORT]`, `env:NAME` or `read:/ABS/PATH` (on the command
/// line and in messages).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Outbound HTTP to a host; without a port, ports 80 and 443.
    Http(String),
    /// One environment variable, passed through from the host's environment.
    Env(String),
    /// A host directory, read-only, at the same path inside the component.
    Read(PathBuf),
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Http(h) => write!(f, "http:{h}"),
            Capability::Env(v) => write!(f, "env:{v}"),
            Capability::Read(p) => write!(f, "read:{}", p.display()),
        }
    }
}

/// A capability string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid capability `{given}`: {why} (expected http:HOST[:PORT], env:NAME or read:/ABS/PATH)"
)]
pub struct BadCapability {
    pub given: String,
    pub why: &'static str,
}

impl std::str::FromStr for Capability {
    type Err = BadCapability;
    fn from_str(s: &str) -> Result<Capability, BadCapability> {
        let bad = |why| BadCapability {
            given: s.to_string(),
            why,
        };
        let (kind, value) = s.split_once(':').ok_or_else(|| bad("no kind"))?;
        match kind {
            "http" => http_host(value).map(Capability::Http).map_err(bad),
            "env" => {
                let ok = !value.is_empty()
                    && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                ok.then(|| Capability::Env(value.to_string()))
                    .ok_or_else(|| bad("a variable name is letters, digits and `_`"))
            }
            "read" => {
                let p = Path::new(value);
                let ok = p.is_absolute()
                    && p.components()
                        .all(|c| !matches!(c, std::path::Component::ParentDir));
                ok.then(|| Capability::Read(p.to_path_buf()))
                    .ok_or_else(|| bad("a directory is an absolute path without `..`"))
            }
            _ => Err(bad("unknown kind")),
        }
    }
}

/// `HOST[:PORT]` normalised (lower case, no trailing dot), or why not. An address must be
/// written plainly (`127.0.0.1`, `[::1]`): `2130706433` or `0x7f.1` would hide from the operator
/// granting it which address it is.
fn http_host(value: &str) -> Result<String, &'static str> {
    const SHAPE: &str = "a host is letters, digits, `.` and `-`, or an address (IPv6 in brackets), optionally `:PORT`; no scheme or path";
    let (written, port) = crate::http::split_host_port(value).ok_or(SHAPE)?;
    let plain_chars = written.starts_with('[')
        || written
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    if !plain_chars {
        return Err(SHAPE);
    }
    let host = crate::http::address::Host::parse(written).map_err(|_| SHAPE)?;
    if matches!(host, crate::http::address::Host::Addr(_)) && !host.is_plain(written) {
        return Err(
            "write an address plainly, as 127.0.0.1 or [::1]: other spellings hide which address it is",
        );
    }
    Ok(match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    })
}

/// A set of capabilities (declared by a component, granted by the operator, or both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(BTreeSet<Capability>);

/// The manifest's file format.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    http: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    read: Vec<String>,
}

/// A manifest that cannot be read or does not parse.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct BadManifest {
    pub path: PathBuf,
    pub detail: String,
}

/// The most bytes a manifest may have (it lists a few names).
const MANIFEST_MAX: u64 = 64 << 10;

impl Capabilities {
    pub fn none() -> Capabilities {
        Capabilities::default()
    }

    /// The manifest beside `component` (`x.wasm` -> `x.caps.toml`).
    pub fn manifest_path(component: &Path) -> PathBuf {
        component.with_extension("caps.toml")
    }

    /// What the component at `component` declares: its manifest, or nothing when it has none.
    pub fn declared_by(component: &Path) -> Result<Capabilities, BadManifest> {
        let path = Self::manifest_path(component);
        let bad = |detail: String| BadManifest {
            path: path.clone(),
            detail,
        };
        let text = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Capabilities::none()),
            Err(e) => return Err(bad(e.to_string())),
            Ok(m) if !m.is_file() => return Err(bad("not a regular file".into())),
            Ok(m) if m.len() > MANIFEST_MAX => {
                return Err(bad(format!("over {MANIFEST_MAX} bytes")));
            }
            Ok(_) => std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?,
        };
        let m: Manifest = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let all = (m.http.iter().map(|v| format!("http:{v}")))
            .chain(m.env.iter().map(|v| format!("env:{v}")))
            .chain(m.read.iter().map(|v| format!("read:{v}")));
        let caps = all
            .map(|s| s.parse::<Capability>())
            .collect::<Result<BTreeSet<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Capabilities(caps))
    }

    pub fn parse_all<S: AsRef<str>>(items: &[S]) -> Result<Capabilities, BadCapability> {
        items
            .iter()
            .map(|s| s.as_ref().parse())
            .collect::<Result<_, _>>()
            .map(Capabilities)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.0.iter()
    }

    /// Each capability as a string (`http:…`, `env:…`, `read:…`).
    pub fn strings(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// What both sets hold: what a call is given.
    pub fn intersect(&self, other: &Capabilities) -> Capabilities {
        Capabilities(self.0.intersection(&other.0).cloned().collect())
    }

    /// What `self` holds that `other` does not.
    pub fn minus(&self, other: &Capabilities) -> Capabilities {
        Capabilities(self.0.difference(&other.0).cloned().collect())
    }

    /// The granted hosts, for the HTTP allow-list.
    pub fn http_hosts(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|c| match c {
                Capability::Http(h) => Some(h.clone()),
                _ => None,
            })
            .collect()
    }

    /// The granted variables with their values now (unset ones are left out).
    pub fn env_values(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|c| match c {
                Capability::Env(v) => std::env::var(v).ok().map(|value| (v.clone(), value)),
                _ => None,
            })
            .collect()
    }

    /// The granted read-only directories.
    pub fn read_dirs(&self) -> Vec<PathBuf> {
        self.0
            .iter()
            .filter_map(|c| match c {
                Capability::Read(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.strings().join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_parse_and_refuse_what_is_not_one() {
        let ok = [
            "http:Hooks.Example.com",
            "http:127.0.0.1:8080",
            "http:[::1]:9000",
            "http:hooks.example.com.",
            "env:TOKEN_1",
            "read:/srv/x",
        ];
        let caps = Capabilities::parse_all(&ok).unwrap();
        assert_eq!(
            caps.strings(),
            [
                "http:127.0.0.1:8080",
                "http:[::1]:9000",
                "http:hooks.example.com",
                "env:TOKEN_1",
                "read:/srv/x"
            ]
        );
        for bad in [
            "http:https://x.example",
            "http:x.example/path",
            "http:u@x.example",
            "http:x.example:99999",
            "http:2130706433:8080",
            "http:0x7f.1",
            "http:127.1",
            "http:[0::1]",
            "http:[::ffff:127.0.0.1]",
            "http:1.2.3.256",
            "env:A=B",
            "env:",
            "read:relative",
            "read:/srv/../etc",
            "net:x",
            "nothing",
        ] {
            assert!(bad.parse::<Capability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_call_gets_only_what_is_both_declared_and_granted() {
        let declared = Capabilities::parse_all(&["http:a.example", "env:A"]).unwrap();
        let granted = Capabilities::parse_all(&["http:a.example", "env:B"]).unwrap();
        assert_eq!(declared.intersect(&granted).strings(), ["http:a.example"]);
        assert_eq!(declared.minus(&granted).strings(), ["env:A"]);
    }
}
