//! Shared pieces of apiary's converter components.
//!
//! Every built-in converter translates between one foreign format and the persona pack (the pivot
//! format); this crate holds what all of them need, so each converter is only its mapping:
//! - [`job`]: one conversion request, the entry shape of every converter's `convert`;
//! - [`claude`]: the Claude Code plugin layout, which the host also detects and checks;
//! - [`documentation`]: the top-level documentation and licence files any format may keep;
//! - [`models`]: model names -> persona model ids, from the data table `data/models.json`;
//! - [`pack`]: read a persona pack from a tree into an ordered model, and write one back;
//! - [`frontmatter`]: split markdown frontmatter, parse it strictly or (for real-world files that
//!   are not YAML) leniently, and render it;
//! - [`slug`]: one name normaliser with per-format rules;
//! - [`policy`]: agent tool policies, which persona packs cannot enforce (reported lost);
//! - [`vars`]: `${…}` variables only a plugin host defines (lost in a pack);
//! - [`report`] and [`tree`]: the conversion report and the filesystem helpers over `/input` and
//!   `/output`, re-exported from `apiary-guest-sdk`. Those are what any converter needs, so they
//!   live in the SDK third parties use; this crate keeps what is specific to persona packs (and
//!   depends on apiary's schema crate, which is not published).
//!
//! It is plain Rust with no WIT bindings: a member of the root workspace, so `cargo test
//! --workspace` tests it natively, a path dependency of the converters in `guests/`, and a
//! dependency of the host for what both sides must agree on ([`claude`], [`documentation`]).

pub mod claude;
pub mod documentation;
pub mod frontmatter;
pub mod job;
pub mod models;
pub mod pack;
pub mod policy;
pub mod slug;
pub mod vars;

pub use apiary_guest_sdk::{report, tree};

/// The persona pack schema (keys of the manifest, persona frontmatter and MCP entries), the same
/// lists apiary's validator checks.
pub use apiary_schema as schema;
pub use documentation::is_documentation;
pub use frontmatter::{Frontmatter, ParseMode};
pub use job::Job;
pub use pack::{McpServer, Pack, Persona, Skill};
pub use report::{Finding, Report};
pub use serde_json::{Map, Value, json};
