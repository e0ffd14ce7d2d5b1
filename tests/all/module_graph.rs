//! Each crate's modules form a layered graph: no two sibling modules use each other, directly or
//! through other siblings. A cycle is how one concern leaks into another (`paths` needing `dist`
//! needing `paths`), so CI refuses it here with the edges that close it.
//!
//! The graph is read from the sources with `syn`: every `use` and every path that starts with
//! `crate::`, `super::` or `self::` in non-test code is an edge from the module it appears in to
//! the deepest module it names. An edge between a module and its own ancestor or descendant is
//! structure (a parent re-exports, a child uses its parent's types), not a cycle; every other edge
//! is lifted to the two children of the modules' lowest common ancestor, and each parent's
//! children must be acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module by its path from the crate root (`[]` is the root, `["dist", "fetch"]` is
/// `crate::dist::fetch`).
type ModPath = Vec<String>;

/// Where an edge was seen, to show it when it closes a cycle.
#[derive(Clone, Debug)]
struct Seen {
    file: PathBuf,
    line: usize,
    path: String,
}

#[test]
fn no_crate_has_a_module_cycle() {
    let root = apiary_e2e::repo_root();
    let mut crates = Vec::new();
    for group in ["host", "guests"] {
        for entry in std::fs::read_dir(root.join(group)).unwrap() {
            let dir = entry.unwrap().path();
            let src = dir.join("src");
            for file in ["lib.rs", "main.rs"] {
                if src.join(file).is_file() {
                    crates.push((dir.clone(), src.join(file)));
                }
            }
        }
    }
    crates.push((root.join("tests"), root.join("tests/src/lib.rs")));
    assert!(
        crates.len() >= 15,
        "found only {} crate roots",
        crates.len()
    );

    let mut problems = Vec::new();
    let mut modules = 0;
    for (dir, crate_root) in &crates {
        let graph = CrateGraph::read(crate_root);
        modules += graph.modules.len();
        for cycle in graph.cycles() {
            problems.push(format!(
                "{}: {cycle}",
                dir.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(modules > 200, "read only {modules} modules");
    assert!(
        problems.is_empty(),
        "module cycles (move what both sides need into a module of its own, or invert the use):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_cycle_between_siblings_is_found_and_a_parent_child_use_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::X;\n");
    write(
        "a/mod.rs",
        "pub mod inner;\npub struct X;\nuse crate::b::Y;\n",
    );
    write("a/inner.rs", "use super::X;\nfn f() { crate::c::g(); }\n");
    write("b.rs", "pub struct Y;\n");
    write(
        "c.rs",
        "pub fn g() {}\nfn h() -> crate::a::X { crate::a::X }\n#[cfg(test)]\nmod tests { use crate::b::Y; }\n",
    );
    let graph = CrateGraph::read(&src.join("lib.rs"));
    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("a -> c") && cycles[0].contains("c -> a"),
        "{}",
        cycles[0]
    );
    // Test code reaches anywhere: `c`'s tests using `b` made no edge.
    write("b.rs", "pub struct Y;\nfn k() { crate::c::g(); }\n");
    write(
        "c.rs",
        "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::b::Y; }\n",
    );
    assert!(CrateGraph::read(&src.join("lib.rs")).cycles().is_empty());
}

/// One crate's module tree and the uses between its modules.
struct CrateGraph {
    modules: BTreeMap<ModPath, PathBuf>,
    /// Lifted edges: parent -> (from child, to child) -> the first place it was seen.
    edges: BTreeMap<ModPath, BTreeMap<(String, String), Seen>>,
}

impl CrateGraph {
    fn read(crate_root: &Path) -> CrateGraph {
        let mut modules = BTreeMap::new();
        collect_modules(crate_root, Vec::new(), &mut modules);
        let mut graph = CrateGraph {
            modules,
            edges: BTreeMap::new(),
        };
        let files: Vec<_> = graph
            .modules
            .iter()
            .map(|(m, f)| (m.clone(), f.clone()))
            .collect();
        for (module, file) in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{}: cannot parse: {e}", file.display()));
            let mut uses = Uses::default();
            uses.visit_file(&ast);
            for (segments, line) in uses.found {
                let Some(target) = graph.resolve(&module, &segments) else {
                    continue;
                };
                let seen = Seen {
                    file: file.clone(),
                    line,
                    path: segments.join("::"),
                };
                graph.add(&module, &target, seen);
            }
        }
        graph
    }

    /// The deepest module of this crate that `segments` (as written in `module`) names.
    fn resolve(&self, module: &ModPath, segments: &[String]) -> Option<ModPath> {
        let (mut at, rest) = match segments.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &segments[1..]),
            Some("self") => (module.clone(), &segments[1..]),
            Some("super") => {
                let mut at = module.clone();
                let mut rest = segments;
                while rest.first().map(String::as_str) == Some("super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
                (at, rest)
            }
            // A bare path names a child module of this one (or something else: an extern crate,
            // an item in scope, neither of which is an edge).
            Some(first) if self.modules.contains_key(&child(module, first)) => {
                (module.clone(), segments)
            }
            _ => return None,
        };
        for segment in rest {
            let next = child(&at, segment);
            if !self.modules.contains_key(&next) {
                break;
            }
            at = next;
        }
        Some(at)
    }

    fn add(&mut self, from: &ModPath, to: &ModPath, seen: Seen) {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            return; // an ancestor and its descendant
        }
        let edge = (from[common].clone(), to[common].clone());
        self.edges
            .entry(from[..common].to_vec())
            .or_default()
            .entry(edge)
            .or_insert(seen);
    }

    /// Each cycle among one parent's children, with the edges that close it.
    fn cycles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (parent, edges) in &self.edges {
            let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for (a, b) in edges.keys() {
                next.entry(a).or_default().insert(b);
            }
            let mut reported = BTreeSet::new();
            for start in next.keys() {
                let Some(path) = cycle_through(start, &next) else {
                    continue;
                };
                let key: BTreeSet<_> = path.iter().copied().collect();
                if !reported.insert(key) {
                    continue;
                }
                let shown: Vec<String> = path
                    .iter()
                    .zip(path.iter().cycle().skip(1))
                    .map(|(a, b)| {
                        let s = &edges[&(a.to_string(), b.to_string())];
                        format!("{a} -> {b} ({}:{}: {})", s.file.display(), s.line, s.path)
                    })
                    .collect();
                let at = if parent.is_empty() {
                    "crate".to_string()
                } else {
                    format!("crate::{}", parent.join("::"))
                };
                found.push(format!("in {at}: {}", shown.join(", ")));
            }
        }
        found
    }
}

fn child(module: &ModPath, name: &str) -> ModPath {
    let mut m = module.clone();
    m.push(name.to_string());
    m
}

/// A shortest cycle from `start` back to itself, if any (breadth first).
fn cycle_through<'a>(
    start: &'a str,
    next: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &n in next.get(at).into_iter().flatten() {
            if n == start {
                let mut path = vec![at];
                while let Some(&p) = came_from.get(path.last().unwrap()) {
                    path.push(p);
                }
                path.reverse();
                return Some(path);
            }
            if n != start && !came_from.contains_key(n) {
                came_from.insert(n, at);
                queue.push_back(n);
            }
        }
    }
    None
}

/// The file modules under `file` (declared with `mod x;`), inline `mod x { }` blocks included as
/// part of their file.
fn collect_modules(file: &Path, module: ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
    let text = std::fs::read_to_string(file).unwrap();
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    out.insert(module.clone(), file.to_path_buf());
    let dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    for item in &ast.items {
        let syn::Item::Mod(m) = item else { continue };
        if m.content.is_some() || is_test_only(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let explicit = m.attrs.iter().find_map(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else {
                return None;
            };
            if !nv.path.is_ident("path") {
                return None;
            }
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
            else {
                return None;
            };
            Some(file.parent().unwrap().join(s.value()))
        });
        let candidates = explicit.map(|p| vec![p]).unwrap_or_else(|| {
            vec![
                dir.join(format!("{name}.rs")),
                dir.join(&name).join("mod.rs"),
            ]
        });
        let found = candidates.into_iter().find(|p| p.is_file());
        let found = found.unwrap_or_else(|| panic!("{}: no file for `mod {name}`", file.display()));
        collect_modules(&found, child(&module, &name), out);
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>()
                    .is_ok_and(|m| m.path().is_ident("test")))
    })
}

/// Every `use` tree and every path in a file, outside test-only items.
#[derive(Default)]
struct Uses {
    found: Vec<(Vec<String>, usize)>,
}

impl Uses {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, line: usize) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, line);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident, line),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident, line),
            syn::UseTree::Glob(_) => self.found.push((prefix.clone(), line)),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, line);
                }
            }
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident, line: usize) {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.found.push((path, line));
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        self.use_tree(&mut Vec::new(), &u.tree, line);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            let line = path.segments[0].ident.span().start().line;
            self.found.push((segments, line));
        }
        syn::visit::visit_path(self, path);
    }
}
