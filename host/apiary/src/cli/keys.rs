//! `apiary keys new|list|export`: the operator's key store without reading key files by hand.
//! `new --pack` makes a pack's persona keys (and the operator's) ahead of time, for a deployment
//! that must not generate them; `list` shows every key's role and public key; `export --format
//! k8s-secret` writes the Kubernetes Secret that `up --keys-dir` reads once mounted. Secret keys
//! are never printed unless asked for (`--show-secret`, or the Secret an export writes).

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use clap::{Args, Subcommand, ValueEnum};
use nostr_sdk::prelude::{Keys, PublicKey, ToBech32};
use serde::Serialize;

use super::output::{Document, Failed, Human, Outcome, render};
use crate::paths::Data;
use crate::relay::keys::{KeyRole, KeyStore};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make the persona keys of a pack (and the operator's key), or your author key, where none
    /// exist yet.
    ///
    /// Existing keys are kept: a key is an identity, replacing one would orphan what it signed.
    /// The author key (`--author`, `<keys dir>/author.key`) signs the packs you build
    /// (`apiary pack build --sign-with`, `apiary pack sign`, `apiary publish`); its npub is who
    /// installers see as the pack's author.
    #[command(
        after_help = "Examples:\n  apiary keys new --pack ./my-pack\n  apiary keys new --pack ./my-pack --keys-dir ./keys-for-k8s\n  apiary keys new --author\n  apiary pack build ./my-pack --sign-with ~/.local/share/apiary/keys/author.key"
    )]
    New(NewArgs),

    /// List the keys of the store: what each signs for and its public key (npub).
    #[command(
        after_help = "Examples:\n  apiary keys list\n  apiary keys list --keys-dir ./keys --json"
    )]
    List(ListArgs),

    /// Write a pack's persona keys and the operator key as a Kubernetes Secret (stdout or --out).
    ///
    /// A Secret's keys cannot hold `/`, so each key file is named `<pack-id>.<persona>.key` in the
    /// Secret and the manifest's comment lists the `items:` that mount it where `up --keys-dir`
    /// reads it (`<pack-id>/<persona>.key`); deploy/base/statefulset.yaml has the volume.
    #[command(
        after_help = "Examples:\n  apiary keys export --pack ./my-pack --format k8s-secret --out secret.yaml\n  apiary keys export --pack ./my-pack --format k8s-secret > secret.yaml\n  kubectl apply -f secret.yaml"
    )]
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The pack directory whose personas get keys (its manifest id names their namespace).
    #[arg(long, value_name = "DIR", required_unless_present = "author")]
    pub pack: Option<PathBuf>,
    /// Make your pack-signing author key (`<keys dir>/author.key`) instead.
    #[arg(long, conflicts_with = "pack")]
    pub author: bool,
    #[arg(long, value_name = "DIR", help = KEYS_DIR_HELP)]
    pub keys_dir: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long, value_name = "DIR", help = KEYS_DIR_HELP)]
    pub keys_dir: Option<PathBuf>,
    /// Also print each secret key (hex). Anyone who sees it can sign as that persona.
    #[arg(long)]
    pub show_secret: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A Kubernetes Secret manifest (YAML).
    K8sSecret,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The pack directory whose persona keys to export (they must exist: `apiary keys new`).
    #[arg(long, value_name = "DIR")]
    pub pack: PathBuf,
    #[arg(long, value_enum)]
    pub format: Format,
    #[arg(long, value_name = "DIR", help = KEYS_DIR_HELP)]
    pub keys_dir: Option<PathBuf>,
    /// The Secret's name (deploy/base mounts `apiary-keys`).
    #[arg(long, default_value = "apiary-keys")]
    pub name: String,
    /// The Secret's Kubernetes namespace (deploy/base uses `apiary`).
    #[arg(long, default_value = "apiary")]
    pub namespace: String,
    /// Write the Secret to this file (created 0600, never overwritten) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the Secret on a terminal too (it holds every secret key of the pack).
    #[arg(long)]
    pub show_secret: bool,
}

const KEYS_DIR_HELP: &str =
    "The key store to use (default: <data dir>/keys, the one `up` uses without --keys-dir)";

pub fn run(cmd: KeysCommand) -> u8 {
    match cmd {
        KeysCommand::New(a) => render(&new(&a), a.json),
        KeysCommand::List(a) => render(&list(&a), a.json),
        KeysCommand::Export(a) => render(&export(&a), false),
    }
}

fn store(dir: Option<&Path>) -> KeyStore {
    match dir {
        Some(d) => KeyStore::new(d),
        None => Data::locate().key_store(),
    }
}

/// One key as `list` and `new` show it.
#[derive(Serialize)]
struct Entry {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persona: Option<String>,
    npub: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    /// Why `up` would refuse this key (readable by others, a link out of the store, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

impl Entry {
    fn of(role: &KeyRole, keys: &Keys, show_secret: bool) -> Entry {
        let mut entry = Entry::named(role, keys.public_key().to_bech32().unwrap_or_default());
        entry.secret = show_secret.then(|| keys.secret_key().to_secret_hex());
        entry
    }

    /// A key known by its public half only (its secret could not be used).
    fn unusable(role: &KeyRole, public: &PublicKey, problem: String) -> Entry {
        let mut entry = Entry::named(role, public.to_bech32().unwrap_or_default());
        entry.problem = Some(problem);
        entry
    }

    fn named(role: &KeyRole, npub: String) -> Entry {
        let (role, namespace, persona) = match role {
            KeyRole::Operator => ("operator", None, None),
            KeyRole::Relay => ("relay", None, None),
            KeyRole::Author => ("author", None, None),
            KeyRole::Persona { namespace, persona } => {
                ("persona", Some(namespace.clone()), Some(persona.clone()))
            }
        };
        Entry {
            role,
            namespace,
            persona,
            npub,
            secret: None,
            problem: None,
        }
    }

    fn line(&self) -> String {
        let who = match (&self.namespace, &self.persona) {
            (Some(ns), Some(p)) => format!("persona {p} of {ns}"),
            _ => self.role.to_string(),
        };
        match (&self.secret, &self.problem) {
            (_, Some(p)) => format!("{who}  {}  unusable: {p}", self.npub),
            (Some(s), None) => format!("{who}  {}  secret {s}", self.npub),
            (None, None) => format!("{who}  {}", self.npub),
        }
    }
}

/// The keys of a store.
#[derive(Serialize)]
struct Listed {
    dir: PathBuf,
    keys: Vec<Entry>,
}

fn list(args: &ListArgs) -> Result<Listed, Failed> {
    let store = store(args.keys_dir.as_deref());
    // A provisioned store only reads: listing never creates a key.
    let reader = KeyStore::provisioned(store.dir());
    let mut keys = Vec::new();
    for (public, role) in reader.roles() {
        // Loaded with the checks `up` applies, so a key it would refuse is listed as unusable.
        let loaded = match &role {
            KeyRole::Operator => reader.operator(),
            KeyRole::Relay => reader.relay(),
            KeyRole::Author => reader.author(),
            KeyRole::Persona { namespace, persona } => reader.persona(namespace, persona),
        };
        keys.push(match loaded {
            Ok(k) => Entry::of(&role, &k, args.show_secret),
            Err(e) => Entry::unusable(&role, &public, format!("{e:#}")),
        });
    }
    Ok(Listed {
        dir: store.dir().to_path_buf(),
        keys,
    })
}

impl Outcome for Listed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.keys.is_empty() {
            return writeln!(
                to.err,
                "no keys in {} yet (`apiary up` or `apiary keys new --pack DIR` makes them)",
                self.dir.display()
            );
        }
        for k in &self.keys {
            writeln!(to.out, "{}", k.line())?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }

    /// 1 when a key is unusable: `up` would refuse its persona.
    fn exit_code(&self) -> u8 {
        match self.keys.iter().any(|k| k.problem.is_some()) {
            true => super::exit::FAILURE,
            false => super::exit::OK,
        }
    }
}

/// A pack's id and persona names, from its directory (the pack must load).
fn pack_personas(dir: &Path) -> Result<(String, Vec<String>), Failed> {
    let loaded = crate::pack::load(dir);
    let Some(pack) = loaded.pack else {
        return Err(Failed::report(
            &loaded.report,
            format!(
                "error: {} is not a valid pack; `apiary pack validate {}` shows why\n",
                dir.display(),
                dir.display()
            ),
        )
        .with_code("pack.invalid"));
    };
    let names = pack.personas.iter().map(|p| p.name.clone()).collect();
    Ok((pack.manifest.id.clone(), names))
}

/// The keys made (or found) for a pack, or the author key.
#[derive(Serialize)]
struct Made {
    dir: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pack: Option<String>,
    /// The author key's file, for `--sign-with`.
    #[serde(skip_serializing_if = "Option::is_none")]
    author_key: Option<PathBuf>,
    keys: Vec<Entry>,
}

fn new(args: &NewArgs) -> Result<Made, Failed> {
    let store = store(args.keys_dir.as_deref());
    let failed = |e: crate::relay::RelayError| Failed::error(format_args!("{e:#}"));
    let Some(pack) = &args.pack else {
        let author = store.author().map_err(failed)?;
        return Ok(Made {
            dir: store.dir().to_path_buf(),
            pack: None,
            author_key: Some(store.author_path()),
            keys: vec![Entry::of(&KeyRole::Author, &author, false)],
        });
    };
    let (id, personas) = pack_personas(pack)?;
    let mut keys = vec![Entry::of(
        &KeyRole::Operator,
        &store.operator().map_err(failed)?,
        false,
    )];
    for persona in personas {
        let k = store.persona(&id, &persona).map_err(failed)?;
        let role = KeyRole::Persona {
            namespace: id.clone(),
            persona,
        };
        keys.push(Entry::of(&role, &k, false));
    }
    Ok(Made {
        dir: store.dir().to_path_buf(),
        pack: Some(id),
        author_key: None,
        keys,
    })
}

impl Outcome for Made {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        for k in &self.keys {
            writeln!(to.out, "{}", k.line())?;
        }
        match (&self.pack, &self.author_key) {
            (Some(pack), _) => writeln!(
                to.err,
                "✓ keys for {pack} in {} (existing ones kept); `apiary keys export --pack DIR --format k8s-secret` writes them as a Secret",
                self.dir.display()
            ),
            (None, Some(path)) => writeln!(
                to.err,
                "✓ your author key is {} (kept if it existed; back it up, it is who installers pin as your packs' author); sign with `apiary pack build DIR --sign-with {}`",
                path.display(),
                path.display()
            ),
            (None, None) => Ok(()),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

/// A Secret manifest, on stdout or in a file.
enum Exported {
    Stdout(String),
    File(PathBuf),
}

fn export(args: &ExportArgs) -> Result<Exported, Failed> {
    let Format::K8sSecret = args.format;
    if !is_dns_label(&args.name) || !is_dns_label(&args.namespace) {
        return Err(Failed::usage(
            "--name and --namespace must be Kubernetes names: lowercase letters, digits and `-`, at most 63",
        ));
    }
    use std::io::IsTerminal;
    if args.out.is_none() && !args.show_secret && io::stdout().is_terminal() {
        return Err(Failed::usage(
            "the Secret holds the pack's secret keys: redirect stdout to a file, or pass --out FILE (or --show-secret to print it here)",
        ));
    }
    let (id, personas) = pack_personas(&args.pack)?;
    // Only read: an export never makes a key another replica would not have.
    let store = KeyStore::provisioned(store(args.keys_dir.as_deref()).dir());
    let missing = |what: String| {
        move |e: crate::relay::RelayError| {
            Failed::error(format_args!(
                "{what}: {e:#}; make the keys first with `apiary keys new --pack {}`",
                args.pack.display()
            ))
        }
    };
    let mut files = vec![(
        "operator.key".to_string(),
        "operator.key".to_string(),
        store
            .operator()
            .map_err(missing("the operator key".into()))?,
    )];
    for persona in &personas {
        let k = store
            .persona(&id, persona)
            .map_err(missing(format!("the key of persona {persona}")))?;
        files.push((
            format!("{id}.{persona}.key"),
            format!("{id}/{persona}.key"),
            k,
        ));
    }
    let yaml = secret_yaml(&args.name, &args.namespace, &id, &files);
    match &args.out {
        None => Ok(Exported::Stdout(yaml)),
        Some(path) => {
            write_private(path, &yaml)
                .map_err(|e| Failed::error(format_args!("cannot write {}: {e}", path.display())))?;
            Ok(Exported::File(path.clone()))
        }
    }
}

/// `text` into a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// A DNS-1123 label, as Kubernetes names a Secret and a namespace.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The Secret: `data` holds each key file as `up` reads it (hex and a newline), base64.
fn secret_yaml(
    name: &str,
    namespace: &str,
    pack: &str,
    files: &[(String, String, Keys)],
) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = format!(
        "# The persona keys of {pack} and the operator key, for `apiary up --keys-dir`.\n\
         # Mount it with these items (a Secret's keys cannot hold `/`) and defaultMode: 0400:\n\
         #   items:\n"
    );
    for (key, path, _) in files {
        out.push_str(&format!("#     - key: {key}\n#       path: {path}\n"));
    }
    out.push_str(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {namespace}\ntype: Opaque\ndata:\n"
    ));
    for (key, _, keys) in files {
        let text = format!("{}\n", keys.secret_key().to_secret_hex());
        out.push_str(&format!("  {key}: {}\n", b64.encode(text)));
    }
    out
}

impl Outcome for Exported {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        match self {
            Exported::Stdout(yaml) => to.out.write_all(yaml.as_bytes()),
            Exported::File(path) => writeln!(
                to.err,
                "✓ wrote the Secret to {} (0600); apply it with `kubectl apply -f {}`",
                path.display(),
                path.display()
            ),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        None
    }
}
