//! The codes a [`super::DistError`] carries: a closed, documented set, so a script can match on
//! `error.code` in `--json` output and the compiler keeps every site to a code that exists. Each
//! code is `<area>.<kind>` (`archive.size-lie`); the areas are the enums below, and
//! `docs/reference/errors.md` is generated from their doc comments.

use strum::{EnumIter, EnumMessage, IntoEnumIterator, IntoStaticStr};

/// Declares [`Code`] over the area enums: one variant per area, the area's name in the code, and
/// the conversions `DistError::new(code::Archive::Clash, ..)` relies on.
macro_rules! areas {
    ($($variant:ident = $name:literal,)*) => {
        /// One refusal or failure of the install tooling.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Code {
            /// A file or directory could not be read or written (the message says which).
            Io,
            $($variant($variant),)*
        }

        impl Code {
            /// `(area, kind, what it means)`; `io` has no kind.
            fn parts(self) -> (&'static str, Option<&'static str>, &'static str) {
                match self {
                    Code::Io => ("io", None, "A file or directory could not be read or written (the message says which)."),
                    $(Code::$variant(k) => ($name, Some(k.into()), k.get_documentation().unwrap_or("")),)*
                }
            }

            /// Every code, area by area.
            pub fn all() -> Vec<Code> {
                let mut all = vec![Code::Io];
                $(all.extend($variant::iter().map(Code::$variant));)*
                all
            }
        }

        $(impl From<$variant> for Code {
            fn from(k: $variant) -> Code {
                Code::$variant(k)
            }
        })*
    };
}

areas! {
    AgentConfig = "agent-config",
    Archive = "archive",
    Blob = "blob",
    Build = "build",
    Checksum = "checksum",
    Expert = "expert",
    Fetch = "fetch",
    Git = "git",
    Identity = "identity",
    Install = "install",
    Journal = "journal",
    Lock = "lock",
    Pack = "pack",
    Record = "record",
    Registry = "registry",
    Root = "root",
    Signature = "signature",
    Source = "source",
    Trust = "trust",
    Uninstall = "uninstall",
}

impl Code {
    /// What the code means, for the generated reference.
    pub fn meaning(self) -> &'static str {
        self.parts().2
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.parts() {
            (area, Some(kind), _) => write!(f, "{area}.{kind}"),
            (area, None, _) => f.write_str(area),
        }
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `e.code == "archive.clash"`, as scripts see it.
impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        match self.parts() {
            (area, Some(kind), _) => {
                other
                    .strip_prefix(area)
                    .and_then(|rest| rest.strip_prefix('.'))
                    == Some(kind)
            }
            (area, None, _) => *other == area,
        }
    }
}

/// The derives every area shares: kebab-case kinds, listed and documented from the source.
macro_rules! area {
    ($(#[$doc:meta])* $name:ident { $($(#[$kdoc:meta])* $kind:ident,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumIter, EnumMessage)]
        #[strum(serialize_all = "kebab-case")]
        pub enum $name {
            $($(#[$kdoc])* $kind,)*
        }
    };
}

area! {
    /// Agent config files a pack asks to be written into a persona's workspace.
    AgentConfig {
        /// The pack's agent config section is not valid.
        Invalid,
        /// A persona's name cannot be used in an agent config file name.
        Name,
        /// The config file's path is one apiary refuses to write (outside the workspace, or a file the agent's own settings live in).
        Path,
        /// The config file could not be written.
        Write,
    }
}

area! {
    /// Reading a `.buzzpack` archive.
    Archive {
        /// An entry is both a file and a directory.
        Clash,
        /// Not a readable zip (damaged or truncated).
        Damaged,
        /// Two entries have the same name.
        Duplicate,
        /// An entry is encrypted.
        Encrypted,
        /// More entries than the limit.
        Entries,
        /// An entry unpacks to more than the per-file limit.
        FileSize,
        /// An entry uses a compression method other than stored and deflate.
        Method,
        /// An entry's name is unsafe (absolute, `..`, a device name, not normalised).
        Path,
        /// An entry compresses better than any real file does (a zip bomb).
        Ratio,
        /// An entry unpacks to more bytes than its header says.
        SizeLie,
        /// An entry is a device, a FIFO or a socket.
        Special,
        /// An entry is a symbolic link.
        Symlink,
        /// The archive or an entry is larger than the limit.
        TooLarge,
        /// The entries together unpack to more than the limit.
        TotalSize,
        /// The archive carries a version-control directory (`.git`).
        Vcs,
    }
}

area! {
    /// `pack build`: writing an archive from a pack directory.
    Build {
        /// A file is larger than the limit.
        FileSize,
        /// A file name is not UTF-8, or cannot go in an archive.
        Name,
        /// The output path cannot be used (inside the pack, a directory, not writable).
        Output,
        /// A file looks like a secret (a private key, a `.env`) and would ship in the archive.
        Secret,
        /// A file is not a regular file (a device, a FIFO, a socket).
        Special,
        /// A file is a symbolic link.
        Symlink,
        /// The pack is larger than the limit.
        TooLarge,
        /// The pack holds a version-control directory.
        Vcs,
        /// The archive could not be written.
        Write,
    }
}

area! {
    /// The `.sha256` beside an archive, and `--sha256` pins.
    Checksum {
        /// The checksum file is not `sha256sum` output.
        Invalid,
        /// The archive's digest is not the one pinned or published.
        Mismatch,
        /// No checksum was published beside the archive.
        Missing,
    }
}

area! {
    /// Installing a DuDuClaw expert pack.
    Expert {
        /// The converter failed or did not run.
        Convert,
        /// The expert pack could not be read.
        Input,
        /// The source is not an expert pack.
        NotExpert,
        /// The agents' `reports_to` form a cycle.
        ReportsToCycle,
        /// A required part of the expert pack is missing.
        Required,
        /// The sandbox the converter runs in could not start.
        Sandbox,
        /// `--sha256` was given for a directory, which has no single digest.
        Sha256Directory,
        /// The source is of a kind expert packs do not install from.
        Source,
        /// Nothing vouches for the expert pack's contents (no checksum, no `--sha256`, no `--yes`).
        Unverified,
    }
}

area! {
    /// Downloads over HTTP(S).
    Fetch {
        /// The request failed (connection, TLS, timeout).
        Http,
        /// The server answered with an error status.
        HttpStatus,
        /// A plain `http://` URL, which nothing authenticates.
        InsecureHttp,
        /// The response body could not be read.
        Read,
    }
}

area! {
    /// Git sources.
    Git {
        /// `git` failed (the message carries what it said).
        Failed,
        /// The `git` command is not on `PATH`.
        Missing,
        /// The ref or commit asked for does not exist.
        Ref,
        /// `git` ran past its deadline and was stopped.
        Timeout,
        /// The clone grew past the size limit and was stopped.
        TooLarge,
        /// The repository holds more files than the limit.
        TooManyFiles,
    }
}

area! {
    /// Pack ids and the keys that own them.
    Identity {
        /// Another directory already owns this pack id on this host.
        Conflict,
        /// The pack's directory could not be resolved.
        Dir,
        /// The key store's owner records are damaged.
        Owner,
    }
}

area! {
    /// Installing into the install root.
    Install {
        /// A different pack is installed under this id.
        Conflict,
        /// The target directory exists and was not installed by apiary.
        ForeignDir,
        /// Files apiary did not install are in the way.
        ForeignFiles,
        /// The id differs only in case from an installed pack's.
        IdCase,
        /// The pack is installed from another source; `--force` replaces it.
        SourceConflict,
    }
}

area! {
    /// The install journal that makes installs atomic.
    Journal {
        /// The journal is damaged.
        Invalid,
        /// The journal could not be written.
        Write,
    }
}

area! {
    /// `pack.lock`.
    Lock {
        /// The lock file is not valid.
        Invalid,
        /// What was fetched is not what the lock pins.
        Mismatch,
        /// `--locked`, and the lock has no entry for this source.
        NoEntry,
        /// `--locked`, and the entry pins no digest.
        NoPin,
        /// The lock file is larger than the limit.
        TooLarge,
        /// The lock file could not be written.
        Write,
    }
}

area! {
    /// The pack itself.
    Pack {
        /// The pack id cannot be used as an install directory name.
        Id,
        /// The pack does not validate (the diagnostics say why).
        Invalid,
        /// No pack with this id is installed.
        NotInstalled,
    }
}

area! {
    /// The install record each installed pack keeps.
    Record {
        /// The record is damaged.
        Invalid,
        /// The record could not be written.
        Write,
    }
}

area! {
    /// The install root.
    Root {
        /// There is no home directory for the default root, and no `--root`.
        Home,
        /// The root disappeared during the install.
        Missing,
        /// The root is not a directory.
        NotDir,
    }
}

area! {
    /// What to install from.
    Source {
        /// A git limit variable is not a whole number in range.
        GitLimit,
        /// The source is not one apiary installs from.
        Invalid,
        /// The source is not a `.buzzpack` file.
        NotFile,
        /// The source does not exist.
        NotFound,
        /// `--sha256` was given for a git source (pin a commit instead).
        Sha256Git,
    }
}

area! {
    /// The trust store: which hooks and MCP servers of a pack may run.
    Trust {
        /// A trusted hook or MCP server changed since it was trusted.
        Changed,
        /// A hook component cannot be loaded, so nothing was trusted.
        Component,
        /// Trusting needs confirmation and there is no terminal to ask on (`--yes`).
        Confirm,
        /// The directory given cannot be used.
        Dir,
        /// The installed pack's files drifted from its install record.
        Drift,
        /// A hook's path is outside its pack or not a file.
        HookPath,
        /// The trust store file is damaged or too large.
        Invalid,
        /// The installed pack has no install record to trust against.
        NoRecord,
        /// The trust store or its directories are writable by others.
        UnsafeStore,
        /// The hook or MCP server is not trusted.
        Untrusted,
        /// The trust store cannot be used (the message says why).
        Unusable,
        /// Trust was recorded for another version of the pack.
        Version,
        /// The trust store could not be written.
        Write,
    }
}

area! {
    /// Blob servers (Blossom) that `publish` uploads to and `install --relay` downloads from.
    Blob {
        /// No blob server had the archive (each one's answer is in the message).
        Download,
        /// A blob server sent bytes whose sha256 is not the one asked for.
        DigestMismatch,
        /// No blob server to download from: the event lists none and no `--blobs` was given.
        NoServer,
        /// A blob is larger than the signed size or the archive size cap.
        TooLarge,
        /// A blob server refused the upload (or answered with another blob).
        Upload,
    }
}

area! {
    /// Finding and publishing packs on Nostr relays.
    Registry {
        /// No valid pack event for the id (or the version) on the relays.
        NotFound,
        /// A relay refused the event (`OK false`).
        Refused,
        /// A relay could not be reached or queried.
        Relay,
    }
}

area! {
    /// Authors' signatures over archives (NIP-94 kind 1063 events).
    Signature {
        /// An upgrade is signed by another key than the one pinned for the pack id (`--replace-author`).
        AuthorChanged,
        /// The archive's sha256 is not the one the signature names (changed after signing).
        DigestMismatch,
        /// The signature's id or Schnorr signature does not verify (forged or altered).
        Invalid,
        /// The author key cannot be read (missing, not private, not a key).
        Key,
        /// The event is not a pack signature (another kind).
        Kind,
        /// The signature file or event is not a pack signature (not JSON, tags missing, too large).
        Malformed,
        /// The pack is unsigned and signatures are required (`--require-signed`, `require_signed`).
        Missing,
        /// A signature already beside the archive is by another author.
        OtherAuthor,
        /// The signature names another pack id or version than the archive holds.
        PackMismatch,
        /// The event could not be signed.
        Sign,
        /// The installed pack is signed and this one is not (`--replace-author` to accept it).
        Unsigned,
    }
}

area! {
    /// `uninstall`.
    Uninstall {
        /// The directory has no install record, so apiary cannot tell which files are the pack's.
        NoRecord,
    }
}

/// The reference of every code, as `docs/reference/errors.md` holds it.
pub fn reference() -> String {
    let mut out = String::from(
        "# Error codes\n\n<!-- Generated from host/apiary/src/dist/code.rs; do not edit. -->\n\n\
         With `--json`, a command that fails prints `{\"ok\": false, \"error\": {\"code\", \"message\", \
         \"help\"?, \"diagnostics\"?}}` on stdout. The install tooling (`pack build`, `install`, \
         `uninstall`, `verify`, `list`, `trust`) uses the codes below. `component` refusals carry \
         the component store's code (`exists`, `not-granted`, `digest-mismatch`, ...), sandbox \
         refusals the sandbox's (`link`, `deadline`, `memory-cap`, ...), `convert` failures the \
         step that failed (`detection`, `converter`, `output`, `validation`, ...), `pack inspect` \
         `pack.invalid`; anything else is `error` (a failure, exit 1) or `usage` (a wrong command \
         line, exit 64).\n\n| code | meaning |\n|---|---|\n",
    );
    for code in Code::all() {
        out.push_str(&format!("| `{code}` | {} |\n", code.meaning()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_area_dot_kebab_kind_and_all_distinct() {
        assert_eq!(Code::from(Archive::SizeLie).to_string(), "archive.size-lie");
        assert_eq!(
            Code::from(AgentConfig::Invalid).to_string(),
            "agent-config.invalid"
        );
        assert_eq!(Code::Io.to_string(), "io");
        assert!(Code::from(Archive::SizeLie) == "archive.size-lie");
        assert!(Code::from(Archive::SizeLie) != "archive.size");
        assert!(Code::from(Archive::SizeLie) != "build.size-lie");
        assert!(Code::Io == "io" && Code::Io != "io.x");
        let all: Vec<String> = Code::all().iter().map(Code::to_string).collect();
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
        assert!(
            Code::all().iter().all(|c| !c.meaning().is_empty()),
            "every code is documented"
        );
    }
}
