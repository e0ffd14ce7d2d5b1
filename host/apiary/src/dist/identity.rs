//! Pack identity: which install record a pack is, and whose persona keys and workspaces it gets.
//!
//! A manifest `id` is self-declared: anyone can write any id. So nothing that carries an identity is
//! keyed by the id alone:
//!
//! - **Installs** are bound to their source. `pack.lock` records where each pack came from; installing
//!   the same id from another source is refused unless the operator passes `--replace`
//!   ([`same_source`] says what counts as the same source).
//! - **Persona keys and workspaces** live in a *namespace* ([`resolve`]): `<data>/keys/<namespace>/`
//!   and `<workspace root>/<namespace>/<persona>/`. The namespace `<id>` (the layout apiary always
//!   used, so existing keys keep working) belongs to one owner, recorded in
//!   `<data>/keys/<id>/owner.json`: the pack installed as `<root>/<id>`, or else the first pack
//!   directory that ran under it. Any other directory declaring that id is refused, naming the owner;
//!   with `--allow-id-conflict` it runs under `<id>@<digest of its canonical path>` instead, a name no
//!   pack id can spell (ids have no `@`), so it never gets the owner's keys or workspaces.
//!
//! The installed pack always wins its id: running `<root>/<id>` takes the namespace over (an operator
//! who developed a pack in a directory and then installed it keeps its keys). A key namespace from
//! before owner records existed is claimed by whichever pack runs under it first.

use crate::dist::code;
use std::path::{Path, PathBuf};

use super::fetch::Source;
use super::lock::{Lock, LockEntry};
use super::{DistError, Result};
use crate::relay::keys::{KeyStore, Owner};

/// Whose identity a pack directory runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The key and workspace namespace.
    pub namespace: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The pack installed as `<root>/<id>`, from `source`.
    Installed { source: String },
    /// A directory that is not installed and owns its id's namespace.
    Owner,
    /// A directory whose id belongs to another pack (described by `owner`), run under a namespace of
    /// its own because the operator allowed it.
    Separate { owner: String },
}

/// What [`resolve`] looks at.
pub struct Request<'a> {
    /// The operator's install root (`None`: none known).
    pub root: Option<&'a Path>,
    pub keys: &'a KeyStore,
    /// The pack directory to run and the id its manifest declares.
    pub dir: &'a Path,
    pub id: &'a str,
    /// Run a directory whose id belongs to another pack under a namespace of its own, instead of
    /// refusing it.
    pub allow_conflict: bool,
    /// Record ownership (`up`); without it nothing is written (`hook run`).
    pub claim: bool,
}

/// The identity `req.dir` runs under, or a refusal (`identity.conflict`) naming the pack that owns
/// the id.
pub fn resolve(req: &Request<'_>) -> Result<Identity> {
    let dir = req.dir.canonicalize().map_err(|e| {
        DistError::new(
            code::Identity::Dir,
            format!("cannot resolve {}: {e}", req.dir.display()),
        )
    })?;
    let owner = req.keys.owner(req.id).map_err(owner_error)?;
    match find_installed(req, &dir, owner.as_ref())? {
        Install::Here(identity) => Ok(identity),
        Install::Elsewhere { home, source } => conflict(
            req,
            &dir,
            format!("the pack installed from {source} as {}", home.display()),
            format!(
                "run the installed pack with `apiary up {}`, give this pack an id of its own, or",
                home.display()
            ),
        ),
        Install::Nowhere => by_directory(req, &dir, owner),
    }
}

/// Where the id is installed, as [`find_installed`] sees it.
enum Install {
    /// `dir` is the installed pack: its identity.
    Here(Identity),
    /// Another directory is: `home`, installed from `source`.
    Elsewhere {
        home: PathBuf,
        source: String,
    },
    Nowhere,
}

/// Looks the id up in the operator's install root and in the one the owner record names; the
/// installed pack takes the namespace over (recorded when `req.claim`).
fn find_installed(req: &Request<'_>, dir: &Path, owner: Option<&Owner>) -> Result<Install> {
    let id = req.id;
    // The roots that may hold this id: the operator's, and the one the owner record names.
    let mut roots: Vec<PathBuf> = req.root.map(Path::to_path_buf).into_iter().collect();
    if let Some(Owner::Installed { root, .. }) = owner {
        roots.push(root.clone());
    }
    let mut elsewhere = None;
    for root in &roots {
        // Without case too: on a case-insensitive filesystem `COM.X` is `com.x`'s directory.
        let Some((installed_id, entry)) = Lock::load(root)?
            .packs
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(id))
        else {
            continue;
        };
        let root = root.canonicalize().unwrap_or_else(|_| root.clone());
        let home = root.join(&installed_id);
        if installed_id == id && home.canonicalize().ok().as_deref() == Some(dir) {
            if req.claim {
                let me = Owner::Installed {
                    root,
                    source: entry.source.clone(),
                };
                if owner != Some(&me) {
                    req.keys.set_owner(id, &me).map_err(owner_error)?;
                }
            }
            return Ok(Install::Here(Identity {
                namespace: id.to_string(),
                kind: Kind::Installed {
                    source: entry.source,
                },
            }));
        }
        elsewhere.get_or_insert(Install::Elsewhere {
            home,
            source: entry.source,
        });
    }
    Ok(elsewhere.unwrap_or(Install::Nowhere))
}

/// A directory that is not installed: it owns the id when nobody else does (the first to run
/// claims it, when `req.claim`), else it conflicts with the owner.
fn by_directory(req: &Request<'_>, dir: &Path, owner: Option<Owner>) -> Result<Identity> {
    let id = req.id;
    let me = Owner::Directory {
        path: dir.to_path_buf(),
    };
    let owner = match owner {
        Some(o) => Some(o),
        None if req.claim => Some(req.keys.claim(id, &me).map_err(owner_error)?),
        None => None,
    };
    match owner {
        None => Ok(owned(id)),
        Some(o) if o == me => Ok(owned(id)),
        Some(Owner::Directory { path }) => conflict(
            req,
            dir,
            format!("the pack directory {}", path.display()),
            format!(
                "if that pack moved here, delete {} to hand its keys over; give this pack an id of its own; or",
                req.keys
                    .namespace_dir(id)
                    .join(crate::relay::keys::OWNER_FILE)
                    .display()
            ),
        ),
        Some(Owner::Installed { root, source }) => conflict(
            req,
            dir,
            format!(
                "the pack installed from {source} as {} (no longer in that pack.lock)",
                root.join(id).display()
            ),
            "reinstall that pack, give this pack an id of its own, or".to_string(),
        ),
    }
}

fn owned(id: &str) -> Identity {
    Identity {
        namespace: id.to_string(),
        kind: Kind::Owner,
    }
}

fn owner_error(e: crate::relay::RelayError) -> DistError {
    DistError::new(code::Identity::Owner, format!("{e:#}"))
        .help("the key store's owner records are apiary's; restore or remove the file")
}

/// `dir` declares an id that belongs to `owner`: refused, or with `allow_conflict` a namespace bound
/// to the directory.
fn conflict(req: &Request<'_>, dir: &Path, owner: String, remedy: String) -> Result<Identity> {
    let id = req.id;
    if req.allow_conflict {
        return Ok(Identity {
            namespace: separate_namespace(id, dir),
            kind: Kind::Separate { owner },
        });
    }
    Err(DistError::new(
        code::Identity::Conflict,
        format!(
            "{} declares the pack id `{id}`, which belongs to {owner}; refusing to run it with that pack's persona keys and workspaces",
            dir.display()
        ),
    )
    .help(format!(
        "{remedy} pass --allow-id-conflict to run it under an identity of its own (new persona keys and workspaces, bound to this directory)"
    )))
}

/// `<id>@<first 16 hex digits of the SHA-256 of the canonical path>`.
pub fn separate_namespace(id: &str, canonical_dir: &Path) -> String {
    let digest = super::sha256_hex(canonical_dir.as_os_str().as_encoded_bytes());
    format!("{id}@{}", &digest[..16])
}

/// Whether installing from `new_source` (as `pack.lock` would record it) at `new_version` comes from
/// the same place as the installed `prev`, so that it may replace it without `--replace`:
///
/// - the recorded `source` is the new one: the same path (compared after resolving symlinks and
///   `..`, so a `.buzzpack` re-built at the same path is the same source), the same URL (credentials
///   are never recorded), the same git repository whatever the ref (by the URL cloned, without a
///   trailing `.git`: `github:o/r` is `git+https://github.com/o/r.git`; GitHub names without case);
/// - or it is, once the installed version is replaced by the new one in it: the next release at the
///   same place (`…/v1.2.0/meadow-1.2.0.buzzpack` → `…/v1.3.0/meadow-1.3.0.buzzpack`). Both versions
///   must be semantic versions, which cannot hold `/`, `:`, `@` or `%`, so this never changes a host
///   or a directory above the one the version names.
pub fn same_source(prev: &LockEntry, new_source: &str, new_version: &str) -> bool {
    if equivalent(&prev.source, new_source) {
        return true;
    }
    let semver = |v: &str| semver::Version::parse(v).is_ok();
    prev.version != new_version
        && semver(&prev.version)
        && semver(new_version)
        && prev.source.contains(prev.version.as_str())
        && equivalent(
            &prev.source.replace(prev.version.as_str(), new_version),
            new_source,
        )
}

fn equivalent(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    // Git sources by the repository cloned (`github:o/r` is `git+https://github.com/o/r.git`).
    if let (Ok(Source::Git { url: x, .. }), Ok(Source::Git { url: y, .. })) =
        (Source::parse(a), Source::parse(b))
    {
        return repository_key(&x) == repository_key(&y);
    }
    // Local paths (file and directory sources are recorded as absolute paths).
    let is_path = |s: &str| Path::new(s).is_absolute() && !s.contains("://");
    if is_path(a) && is_path(b) {
        let (ca, cb) = (Path::new(a).canonicalize(), Path::new(b).canonicalize());
        return matches!((ca, cb), (Ok(x), Ok(y)) if x == y);
    }
    false
}

/// A clone URL without a trailing `/` or `.git`, scheme and host in lower case, and all of it for
/// github.com, whose owner and repository names ignore case.
fn repository_key(url: &str) -> String {
    let url = url.trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = host.to_ascii_lowercase();
    let path = if host == "github.com" {
        path.to_ascii_lowercase()
    } else {
        path.to_string()
    };
    format!("{}://{host}{path}", scheme.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(source: &str, version: &str) -> LockEntry {
        LockEntry {
            source: source.into(),
            sha256: None,
            resolved: None,
            version: version.into(),
            installed_at: "2026-01-01T00:00:00Z".into(),
            extra: Default::default(),
        }
    }

    #[test]
    fn same_source_rules() {
        let url = "https://example.com/releases/v1.2.0/meadow-1.2.0.buzzpack";
        let prev = entry(url, "1.2.0");
        assert!(same_source(&prev, url, "1.2.0"), "reinstall");
        assert!(same_source(
            &prev,
            "https://example.com/releases/v1.3.0/meadow-1.3.0.buzzpack",
            "1.3.0"
        ));
        assert!(
            !same_source(&prev, "https://evil.example/meadow-1.2.0.buzzpack", "1.2.0"),
            "another host"
        );
        assert!(
            !same_source(
                &prev,
                "https://example.com/releases/v1.3.0/meadow-1.3.0.buzzpack",
                "1.2.0"
            ),
            "a version the manifest does not declare"
        );
        assert!(
            !same_source(
                &prev,
                "https://example.com/other/v1.3.0/meadow-1.3.0.buzzpack",
                "1.3.0"
            ),
            "another directory"
        );
        // A version that is not semver never rewrites a source.
        let odd = entry("https://example.com/x/1/a.buzzpack", "1");
        assert!(!same_source(
            &odd,
            "https://example.com/x/evil/a.buzzpack",
            "evil"
        ));
        let gh = entry("github:Owner/Repo", "1.0.0");
        assert!(same_source(&gh, "github:owner/repo", "2.0.0"));
        assert!(!same_source(&gh, "github:other/repo", "1.0.0"));
        assert!(same_source(
            &gh,
            "git+https://github.com/owner/repo.git",
            "1.0.0"
        ));
        assert!(!same_source(
            &gh,
            "git+https://gitlab.com/owner/repo",
            "1.0.0"
        ));
        let lab = entry("git+https://GitLab.com/Owner/Repo.git", "1.0.0");
        assert!(same_source(
            &lab,
            "git+https://gitlab.com/Owner/Repo/",
            "1.0.0"
        ));
        assert!(!same_source(
            &lab,
            "git+https://gitlab.com/owner/repo",
            "1.0.0"
        ));

        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a/x-1.0.0.buzzpack");
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        std::fs::write(&a, "x").unwrap();
        let dotted = tmp.path().join("a/../a/x-1.0.0.buzzpack");
        let prev = entry(&a.display().to_string(), "1.0.0");
        assert!(same_source(&prev, &dotted.display().to_string(), "1.0.0"));
        let b = tmp.path().join("b/x-1.0.0.buzzpack");
        std::fs::create_dir_all(b.parent().unwrap()).unwrap();
        std::fs::write(&b, "x").unwrap();
        assert!(!same_source(&prev, &b.display().to_string(), "1.0.0"));
    }

    #[test]
    fn a_directory_owns_its_id_and_others_are_refused_or_separated() {
        let tmp = tempfile::tempdir().unwrap();
        let keys = KeyStore::new(tmp.path().join("keys"));
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let req = |dir, allow| Request {
            root: None,
            keys: &keys,
            dir,
            id: "com.x",
            allow_conflict: allow,
            claim: true,
        };
        let first = resolve(&req(&a, false)).unwrap();
        assert_eq!(first.namespace, "com.x");
        assert_eq!(resolve(&req(&a, false)).unwrap(), first);
        let e = resolve(&req(&b, false)).unwrap_err();
        assert_eq!(e.code, "identity.conflict");
        assert!(
            e.message
                .contains(&a.canonicalize().unwrap().display().to_string())
        );
        let sep = resolve(&req(&b, true)).unwrap();
        assert!(sep.namespace.starts_with("com.x@"), "{}", sep.namespace);
        assert_ne!(sep.namespace, separate_namespace("com.x", &a));
    }

    #[test]
    fn the_installed_pack_wins_its_id() {
        let tmp = tempfile::tempdir().unwrap();
        let keys = KeyStore::new(tmp.path().join("keys"));
        let root = tmp.path().join("root");
        let home = root.join("com.x");
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&dev).unwrap();
        let req = |dir, id| Request {
            root: Some(&root),
            keys: &keys,
            dir,
            id,
            allow_conflict: false,
            claim: true,
        };
        // A directory ran first and owned the id; then the pack was installed.
        assert_eq!(resolve(&req(&dev, "com.x")).unwrap().kind, Kind::Owner);
        let mut lock = Lock::default();
        lock.packs
            .insert("com.x".into(), entry("/src/x-1.0.0.buzzpack", "1.0.0"));
        std::fs::create_dir_all(root.join(".apiary")).unwrap();
        lock.save(&root, &root.join(".apiary")).unwrap();
        let installed = resolve(&req(&home, "com.x")).unwrap();
        assert_eq!(installed.namespace, "com.x");
        assert!(matches!(installed.kind, Kind::Installed { .. }));
        let e = resolve(&req(&dev, "com.x")).unwrap_err();
        assert!(e.message.contains("/src/x-1.0.0.buzzpack"), "{}", e.message);
        // Another case of the id is the same directory on some filesystems: refused too.
        let e = resolve(&req(&dev, "COM.X")).unwrap_err();
        assert_eq!(e.code, "identity.conflict");
        // Without a root, the owner record still knows where the installed pack lives.
        let no_root = Request {
            root: None,
            ..req(&dev, "com.x")
        };
        assert!(resolve(&no_root).is_err());
        let no_root = Request {
            root: None,
            ..req(&home, "com.x")
        };
        assert!(matches!(
            resolve(&no_root).unwrap().kind,
            Kind::Installed { .. }
        ));
    }
}
