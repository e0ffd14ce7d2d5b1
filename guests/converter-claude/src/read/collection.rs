//! The reader's side of collections (issue 38, class 2): a manifest path that names nothing in
//! the plugin folder is looked for in the collection around it ([`crate::locate`]), read from
//! there, and carried or pointed at where the published plugin would hold it.

use std::path::Path;

use convert_kit::{Map, Value, tree};

use super::Reader;
use crate::locate::{Found, Missing, Place};
use crate::util::{clean_path, strings};

/// A component file or folder read from the plugin, or from the collection around it.
#[derive(Debug, Clone)]
pub(super) struct Src {
    pub(super) rel: String,
    pub(super) in_collection: bool,
}

impl Src {
    pub(super) fn plugin(rel: impl Into<String>) -> Src {
        Src {
            rel: rel.into(),
            in_collection: false,
        }
    }
}

impl Reader<'_> {
    /// Where the plugin lies, and the collection around it.
    pub(super) fn place(&self) -> Place<'_> {
        Place {
            plugin: self.root,
            collection: self
                .ctx
                .collection
                .as_deref()
                .map(|c| (c, self.ctx.prefix.as_str())),
        }
    }

    /// Where manifest path `p` of `field` leads (`exists` says what it must name), reporting a
    /// find in the collection; `None` when it leads nowhere, reported as dangling.
    pub(super) fn locate(
        &mut self,
        field: &str,
        p: &str,
        exists: impl Fn(&Path, &str) -> bool,
    ) -> Option<Src> {
        let found = self.place().locate(p, exists);
        match found {
            Ok(Found::Plugin(rel)) => Some(Src::plugin(rel)),
            Ok(Found::Collection(rel)) => {
                self.report.reinterpreted(
                    "component-from-collection",
                    &self.at(self.host.manifest()),
                    field,
                    format!("`{field}` path `{p}` is not in the plugin folder; read from the collection's `{rel}` (where its publish step would take it from)"),
                );
                Some(Src {
                    rel,
                    in_collection: true,
                })
            }
            Err(Missing::Absent) => {
                let what = if self.ctx.collection.is_some() {
                    "is neither in the plugin nor in its collection"
                } else {
                    "is not in the plugin"
                };
                self.dangling(field, p, what);
                None
            }
            Err(Missing::Outside(why)) => {
                self.dangling(field, p, &why);
                None
            }
        }
    }

    /// The tree `src` is relative to.
    pub(super) fn base(&self, src: &Src) -> &Path {
        match (&self.ctx.collection, src.in_collection) {
            (Some(c), true) => c,
            _ => self.root,
        }
    }

    /// `src` as the report shows it: relative to the input.
    pub(super) fn shown(&self, src: &Src) -> String {
        if src.in_collection {
            src.rel.clone()
        } else {
            self.at(&src.rel)
        }
    }

    /// Component paths (commands, output styles, …) the manifest lists must exist too: Claude
    /// Code would fail to load them. One the collection holds is carried as the plugin would
    /// hold it once published, and the kept manifest names it there.
    pub(super) fn component_paths(&mut self, plugin: &Map<String, Value>) {
        for field in ["commands", "outputStyles", "hooks", "lspServers"] {
            for p in strings(plugin.get(field)) {
                if p.contains("://") {
                    continue;
                }
                let any =
                    |root: &Path, rel: &str| tree::is_file(root, rel) || tree::is_dir(root, rel);
                if let Some(src) = self.locate(field, &p, any)
                    && src.in_collection
                {
                    self.materialise(field, &p, &src);
                }
            }
        }
    }

    /// Carries what `src` (in the collection) names at the plugin path `p` means once published
    /// (the collection's path when `p` climbs), and points the kept manifest's `p` there.
    fn materialise(&mut self, field: &str, p: &str, src: &Src) {
        let at = published_at(p, src);
        let base = self.base(src).to_path_buf();
        let files = if tree::is_dir(&base, &src.rel) {
            tree::walk(&base, &src.rel).unwrap_or_default()
        } else {
            vec![src.rel.clone()]
        };
        for file in files {
            let inner = file[src.rel.len()..].trim_start_matches('/');
            let to = if inner.is_empty() {
                at.clone()
            } else {
                format!("{at}/{inner}")
            };
            match tree::read_bytes(&base, &file) {
                Ok(bytes) if !tree::is_file(self.root, &to) => self.collected.push((to, bytes)),
                Ok(_) => {}
                Err(e) => self.report.lost("file-unreadable", &file, "", e),
            }
        }
        self.repoint_kept(field, p, &at);
    }

    /// Points the kept manifest's `field` path `p` at `at`, the plugin path it has once published.
    pub(super) fn repoint_kept(&mut self, field: &str, p: &str, at: &str) {
        if let Some(Value::Object(kept)) = self.ext.get_mut("plugin") {
            repoint(kept, field, p, &format!("./{at}"));
        }
    }
}

/// Where manifest path `p`, found at `src`, lies in the plugin once published: where it is, for
/// one in the plugin; as written (or, when that climbs, the collection's path) for one the
/// collection holds.
pub(super) fn published_at(p: &str, src: &Src) -> String {
    if !src.in_collection {
        return src.rel.clone();
    }
    clean_path(p).unwrap_or_else(|_| src.rel.clone())
}

/// Replaces the path `from` by `to` in manifest field `field` (a path or a list of them).
fn repoint(plugin: &mut Map<String, Value>, field: &str, from: &str, to: &str) {
    match plugin.get_mut(field) {
        Some(Value::String(s)) if s == from => *s = to.to_string(),
        Some(Value::Array(items)) => {
            for item in items {
                if item.as_str() == Some(from) {
                    *item = to.into();
                }
            }
        }
        _ => {}
    }
}
