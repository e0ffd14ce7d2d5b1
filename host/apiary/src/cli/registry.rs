//! `apiary pack sign`, `publish` and `search`: authors' signatures over archives and the registry
//! on Nostr relays and Blossom blob servers (see `dist::signature`, `dist::registry`).

use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use nostr_sdk::prelude::Keys;
use serde::Serialize;

use super::output::{Document, Failed, Human, Outcome};
use crate::dist::registry::{self, Listing, Published, Where};
use crate::dist::signature::{self, Signed};
use crate::dist::{DistError, code};

const SIGN_WITH_HELP: &str = "The author's key file (hex or nsec1; `apiary keys new --author` makes one): it must be yours and private (0600)";

#[derive(Debug, Args)]
#[command(
    after_help = "Writes <archive>.sig.json beside the archive: a Nostr event (NIP-94 file metadata, \
kind 1063) signed by the author key, naming the pack id, version and the archive's sha256. \
`apiary install` checks it and pins the author (npub) for the pack id; an upgrade signed by \
another key is refused unless --replace-author. Ship it with the archive and its .sha256.\n\n\
Examples:\n  apiary keys new --author\n  apiary pack sign my-pack-1.2.0.buzzpack --sign-with ~/.local/share/apiary/keys/author.key\n  \
apiary pack build ./my-pack --sign-with ~/.local/share/apiary/keys/author.key   (build and sign)"
)]
pub struct SignArgs {
    /// The .buzzpack archive to sign.
    pub archive: PathBuf,
    #[arg(long, value_name = "KEY_FILE", help = SIGN_WITH_HELP)]
    pub sign_with: PathBuf,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Uploads the archive to each blob server (Blossom: PUT /upload, authorised by an \
event signed with the author key), signs the pack event naming where they serve it (writing it \
beside the archive as <archive>.sig.json) and publishes it to each relay. `apiary relay --blobs DIR` \
and `apiary up --blobs DIR` serve blobs on the relay's own port.\n\n\
Examples:\n  apiary publish my-pack-1.2.0.buzzpack --sign-with author.key --relay ws://127.0.0.1:7777 --blobs http://127.0.0.1:7777\n  \
apiary search review --relay ws://127.0.0.1:7777\n  apiary install com.example.my-pack --relay ws://127.0.0.1:7777"
)]
pub struct PublishArgs {
    /// The .buzzpack archive to publish.
    pub archive: PathBuf,
    #[arg(long, value_name = "KEY_FILE", help = SIGN_WITH_HELP)]
    pub sign_with: PathBuf,
    /// A relay to publish the pack event to (repeatable).
    #[arg(long = "relay", value_name = "URL", required = true)]
    pub relays: Vec<String>,
    /// A Blossom blob server to upload the archive to (repeatable; the first is the event's `url`).
    #[arg(long = "blobs", value_name = "URL", required = true)]
    pub blobs: Vec<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Lists the packs whose id or description holds every word (case-insensitive; no \
words: all), the newest version of each pack per author. Only events whose signature verifies are \
listed. Install one with `apiary install <pack-id> --relay URL`.\n\n\
Examples:\n  apiary search review --relay ws://127.0.0.1:7777\n  apiary search --relay wss://relay.example --json | jq '.packs[].pack_id'"
)]
pub struct SearchArgs {
    /// Words the pack's id or description must hold.
    pub words: Vec<String>,
    /// A relay to ask (repeatable).
    #[arg(long = "relay", value_name = "URL", required = true)]
    pub relays: Vec<String>,
    /// Print the packs as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The author key of `--sign-with`.
fn author_key(path: &Path) -> Result<Keys, Failed> {
    crate::relay::keys::load_key_file(path).map_err(|e| {
        DistError::new(code::Signature::Key, format!("the author key: {e:#}"))
            .help("make one with `apiary keys new --author` (it prints its path), or chmod 600 the file")
            .into()
    })
}

/// `pack sign` (and `pack build --sign-with`): the signature written.
#[derive(Serialize)]
pub(super) struct SignedArchive {
    pack_id: String,
    version: String,
    sha256: String,
    author: String,
    signature_file: PathBuf,
}

impl SignedArchive {
    fn of(archive: &Path, s: &Signed) -> SignedArchive {
        SignedArchive {
            pack_id: s.claim.pack_id.clone(),
            version: s.claim.version.clone(),
            sha256: s.claim.sha256.clone(),
            author: s.npub(),
            signature_file: signature::beside(archive),
        }
    }
}

pub(super) fn sign(args: &SignArgs) -> Result<SignedArchive, Failed> {
    sign_archive(&args.archive, &args.sign_with)
}

/// Signs `archive` with the key in `key_file`.
pub(super) fn sign_archive(archive: &Path, key_file: &Path) -> Result<SignedArchive, Failed> {
    let keys = author_key(key_file)?;
    let signed = registry::sign_beside(archive, &keys, Vec::new())?;
    Ok(SignedArchive::of(archive, &signed))
}

impl SignedArchive {
    pub(super) fn line(&self) -> String {
        format!(
            "Signed {} {} as {}\n  {}",
            self.pack_id,
            self.version,
            self.author,
            self.signature_file.display()
        )
    }
}

impl Outcome for SignedArchive {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        writeln!(to.err, "{}", self.line())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

pub(super) fn publish(args: &PublishArgs) -> Result<PublishedOutcome, Failed> {
    let keys = author_key(&args.sign_with)?;
    let place = Where {
        relays: args.relays.clone(),
        blobs: args.blobs.clone(),
    };
    Ok(PublishedOutcome(registry::publish(
        &args.archive,
        &keys,
        &place,
    )?))
}

#[derive(Serialize)]
#[serde(transparent)]
pub(super) struct PublishedOutcome(Published);

impl Outcome for PublishedOutcome {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        let p = &self.0;
        writeln!(
            to.err,
            "Published {} {} by {}\n  event {} on {}\n  archive {} at {}\n  install it with: apiary install {} --relay {}",
            p.pack_id,
            p.version,
            p.author,
            p.event_id,
            p.relays.join(", "),
            p.sha256,
            p.urls.join(", "),
            p.pack_id,
            p.relays.first().map(String::as_str).unwrap_or("URL"),
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

pub(super) fn search(args: &SearchArgs) -> Result<Found, Failed> {
    Ok(Found {
        packs: registry::search(&args.words, &args.relays)?,
    })
}

#[derive(Serialize)]
pub(super) struct Found {
    packs: Vec<Listing>,
}

impl Outcome for Found {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        if self.packs.is_empty() {
            return writeln!(to.err, "no pack matches");
        }
        for p in &self.packs {
            writeln!(
                to.out,
                "{} {}  by {}  published {}\n    {}",
                super::live::terminal_safe(&p.pack_id),
                super::live::terminal_safe(&p.version),
                p.author,
                p.published_at,
                super::live::terminal_safe(&p.description),
            )?;
        }
        Ok(())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}
