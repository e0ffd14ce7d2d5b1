//! A file of the pack being read: its text, where its keys are, and typed access to its values that
//! turns every type mismatch into a diagnostic pointing at the key (instead of stopping at the first
//! serde error). YAML frontmatter is converted to `serde_json::Value` so both formats share one code path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::frontmatter;
use crate::diag::{Diagnostic, Report};
use crate::safe_fs::FinalLink;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Json,
    /// YAML frontmatter starting at this byte offset of the file.
    Yaml {
        offset: usize,
    },
    Toml,
}

/// A piece of a shared source text (a persona's prompt body), or a normalised copy where the file
/// needed one. Sharing spares a copy of every prompt: for a 200-persona pack that is ~400 KB of
/// fresh heap, a hundred first-touch page faults of each `validate` and `inspect`.
#[derive(Clone)]
pub struct SharedText {
    text: Arc<str>,
    range: std::ops::Range<usize>,
}

impl SharedText {
    /// `part` of `text`; `None` when `part` does not lie inside `text`.
    pub fn part_of(text: &Arc<str>, part: &str) -> Option<SharedText> {
        let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let range = start..start + part.len();
        // Both ends must fall on char boundaries of `text` for `Deref` to slice it.
        (text.get(range.clone())?.as_ptr() == part.as_ptr()).then(|| SharedText {
            text: Arc::clone(text),
            range,
        })
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> SharedText {
        let range = 0..text.len();
        SharedText {
            text: Arc::from(text),
            range,
        }
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text[self.range.clone()]
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &SharedText) -> bool {
        **self == **other
    }
}

/// One file's text plus what is needed to point at places in it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Path relative to the pack root, as shown in diagnostics.
    pub rel: PathBuf,
    /// Shared with the report, which cuts snippets from it.
    pub text: Arc<str>,
    pub syntax: Syntax,
}

impl SourceFile {
    pub fn new(rel: impl Into<PathBuf>, text: String, syntax: Syntax) -> Self {
        Self::shared(rel, Arc::from(text), syntax)
    }

    /// A source whose text is already shared (e.g. registered with a report).
    pub fn shared(rel: impl Into<PathBuf>, text: Arc<str>, syntax: Syntax) -> Self {
        SourceFile {
            rel: rel.into(),
            text,
            syntax,
        }
    }

    /// Byte span of the key at `path` (e.g. `["defaults", "temprature"]`), best effort.
    pub fn locate(&self, path: &[&str]) -> Option<(usize, usize)> {
        let mut from = match self.syntax {
            Syntax::Json | Syntax::Toml => 0,
            Syntax::Yaml { offset } => offset,
        };
        let mut found = None;
        for (depth, key) in path.iter().enumerate() {
            let hit = match self.syntax {
                Syntax::Yaml { offset } if depth == 0 => {
                    let end = self.yaml_end(offset);
                    frontmatter::locate_key(&self.text[offset..end], key)
                        .map(|(o, l)| (o + offset, l))
                }
                // Only inside the frontmatter: the same word in the prompt body is not the key.
                Syntax::Yaml { offset } => {
                    find_yaml_nested_key(&self.text[..self.yaml_end(offset)], from, key)
                }
                Syntax::Json => find_json_key(&self.text, from, key),
                Syntax::Toml if depth + 1 < path.len() => self
                    .text
                    .get(from..)
                    .and_then(|t| t.find(key))
                    .map(|i| (from + i, key.len())),
                Syntax::Toml => find_toml_key(&self.text, from, key),
            };
            // A nested key written in flow style (`triggers: {mentoins: true}`) is not on a line of
            // its own: point at the enclosing key rather than nowhere.
            let Some((off, len)) = hit else {
                return found;
            };
            from = off + len;
            found = Some((off, len));
        }
        found
    }

    fn yaml_end(&self, offset: usize) -> usize {
        // The frontmatter ends at the closing delimiter; searching past it would find body text.
        self.text[offset..]
            .match_indices("\n---")
            .map(|(i, _)| offset + i + 1)
            .find(|&i| self.text[i + 3..].starts_with(['\n', '\r']) || i + 3 == self.text.len())
            .unwrap_or(self.text.len())
    }

    /// A diagnostic in this file, located at `path` when the key can be found.
    pub fn diag(&self, d: Diagnostic, path: &[&str]) -> Diagnostic {
        let d = d.in_file(&self.rel);
        match self.locate(path) {
            Some((off, len)) => d.at(&self.text, off, len),
            None => d,
        }
    }

    pub fn register(&self, report: &mut Report) {
        report.add_shared_source(&self.rel, Arc::clone(&self.text));
    }
}

fn find_json_key(text: &str, from: usize, key: &str) -> Option<(usize, usize)> {
    let needle = format!("\"{key}\"");
    let mut start = from;
    while let Some(i) = text.get(start..)?.find(&needle) {
        let at = start + i;
        let after = text[at + needle.len()..].trim_start();
        if after.starts_with(':') {
            return Some((at, needle.len()));
        }
        start = at + needle.len();
    }
    None
}

fn find_toml_key(text: &str, from: usize, key: &str) -> Option<(usize, usize)> {
    let mut offset = from;
    for line in text.get(from..)?.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            return Some((offset + line.len() - trimmed.len(), key.len()));
        }
        offset += line.len();
    }
    None
}

fn find_yaml_nested_key(text: &str, from: usize, key: &str) -> Option<(usize, usize)> {
    let mut offset = from;
    for line in text.get(from..)?.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let unquoted = trimmed.trim_start_matches(['"', '\'']);
        if unquoted.starts_with(key)
            && unquoted[key.len()..]
                .trim_start_matches(['"', '\''])
                .starts_with(':')
        {
            return Some((
                offset + indent + (trimmed.len() - unquoted.len()),
                key.len(),
            ));
        }
        offset += line.len();
    }
    None
}

/// The JSON type name used in messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// Typed reads from one mapping of a source file; mismatches become errors in `report`.
pub struct Fields<'a> {
    pub src: &'a SourceFile,
    pub map: &'a Map<String, Value>,
    /// Key path of `map` inside the file (empty for the top level).
    pub prefix: Vec<&'a str>,
    /// Code prefix for diagnostics, e.g. `persona` or `manifest`.
    pub area: &'static str,
}

impl<'a> Fields<'a> {
    fn path<'k>(&'k self, key: &'k str) -> Vec<&'k str> {
        let mut p = self.prefix.clone();
        p.push(key);
        p
    }

    fn shown_key(&self, key: &str) -> String {
        let mut p = self.prefix.clone();
        p.push(key);
        p.join(".")
    }

    pub fn type_error(&self, report: &mut Report, key: &str, expected: &str, found: &Value) {
        let msg = format!(
            "`{}` must be {expected}, found {} {}",
            self.shown_key(key),
            type_name(found),
            shown(found)
        );
        report.push(self.src.diag(
            Diagnostic::error(type_code(self.area), msg),
            &self.path(key),
        ));
    }

    /// A present, non-null value (`null` means absent everywhere in the spec).
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        // A frontmatter or manifest mapping has a handful of keys, and each is asked for: a scan
        // compares a few short strings where a lookup would hash the key (SipHash) first.
        let value = if self.map.len() <= 16 {
            self.map.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
        } else {
            self.map.get(key)
        };
        value.filter(|v| !v.is_null())
    }

    pub fn string(&self, report: &mut Report, key: &str) -> Option<String> {
        match self.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.type_error(report, key, "a string", other);
                None
            }
        }
    }

    pub fn bool(&self, report: &mut Report, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.type_error(report, key, "true or false", other);
                None
            }
        }
    }

    pub fn number(&self, report: &mut Report, key: &str) -> Option<f64> {
        match self.get(key)? {
            Value::Number(n) => n.as_f64(),
            other => {
                self.type_error(report, key, "a number", other);
                None
            }
        }
    }

    pub fn positive_int(&self, report: &mut Report, key: &str) -> Option<u64> {
        match self.get(key)? {
            Value::Number(n) if n.as_u64().is_some_and(|n| n > 0) => n.as_u64(),
            other => {
                self.type_error(report, key, "a positive integer", other);
                None
            }
        }
    }

    pub fn string_list(&self, report: &mut Report, key: &str) -> Option<Vec<String>> {
        match self.get(key)? {
            Value::Array(items) if items.iter().all(Value::is_string) => Some(
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
            ),
            other => {
                self.type_error(report, key, "a list of strings", other);
                None
            }
        }
    }

    pub fn object(&self, report: &mut Report, key: &str) -> Option<&'a Map<String, Value>> {
        match self.get(key)? {
            Value::Object(m) => Some(m),
            other => {
                self.type_error(report, key, "a mapping", other);
                None
            }
        }
    }

    /// Reads of a nested mapping, with key paths that keep pointing into this file.
    pub fn nested(&self, key: &'a str, map: &'a Map<String, Value>) -> Fields<'a> {
        let mut prefix = self.prefix.clone();
        prefix.push(key);
        Fields {
            src: self.src,
            map,
            prefix,
            area: self.area,
        }
    }
}

fn type_code(area: &'static str) -> &'static str {
    match area {
        "manifest" => "manifest.type",
        "persona" => "persona.type",
        "overrides" => "overrides.type",
        "mcp" => "mcp.type",
        "hooks" => "hooks.type",
        _ => "type",
    }
}

/// The closest known key, for "did you mean" hints.
pub fn suggest(unknown: &str, known: &[&str]) -> Option<String> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(unknown, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k.to_string())
}

/// Why a small file could not be read (or decoded): the message completes a diagnostic on the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not a regular file (a FIFO, a device), or a final link where none may be: refused before
    /// anything waits on it.
    #[error("{0}")]
    Refused(std::io::Error),
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    #[error("file is larger than the {} KiB limit", limit / 1024)]
    TooLarge { limit: u64 },
    #[error(transparent)]
    NotUtf8(#[from] NotUtf8),
}

impl ReadError {
    /// A short machine-readable kind, for `--json` output and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadError::Refused(_) => "refused",
            ReadError::Open(_) => "open",
            ReadError::Read(_) => "read",
            ReadError::TooLarge { .. } => "too-large",
            ReadError::NotUtf8(_) => "not-utf8",
        }
    }
}

/// Text that is not UTF-8: where its first invalid byte is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the file is not valid UTF-8 (invalid byte at offset {at})")]
pub struct NotUtf8 {
    pub at: usize,
}

/// Reads a file the operator named (an overrides file, a base prompt) that must stay small. A final
/// symbolic link is followed (the operator's own choice); anything but a regular file (a FIFO, a
/// device) is refused without waiting on it, and more than `limit` bytes are never read.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    read_opened(path, FinalLink::Follow, limit, None)
}

/// Reads a file of a pack at a path already resolved inside it, that must stay small: as
/// [`read_limited`], but a final link (swapped in after the resolution) is refused. `known` is the
/// size an earlier `stat` gave; it only sizes the buffer, the limit is enforced on what is read.
pub fn read_limited_sized(
    path: &Path,
    limit: u64,
    known: Option<u64>,
) -> Result<Vec<u8>, ReadError> {
    read_opened(path, FinalLink::Refuse, limit, known)
}

fn read_opened(
    path: &Path,
    link: FinalLink,
    limit: u64,
    known: Option<u64>,
) -> Result<Vec<u8>, ReadError> {
    let (file, len) = crate::safe_fs::open_regular(path, link).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => ReadError::Refused(e),
        _ => ReadError::Open(e),
    })?;
    let mut bytes = Vec::new();
    read_limited_from(file, limit, known.or(Some(len)), &mut bytes)?;
    Ok(bytes)
}

/// [`read_limited_sized`] from a file already open (e.g. by [`super::paths::open`], which checked
/// what it opened), into `bytes`, replacing what it held: a caller reading many files reuses one
/// buffer instead of allocating (and first touching) one per file.
pub fn read_limited_from(
    file: std::fs::File,
    limit: u64,
    known: Option<u64>,
    bytes: &mut Vec<u8>,
) -> Result<(), ReadError> {
    use std::io::Read;
    // Sized up front so a small file is read in one call, not in growing chunks.
    let size = match known {
        Some(len) => len,
        None => file.metadata().map_or(0, |m| m.len()),
    }
    .min(limit) as usize;
    let mut file = file.take(limit + 1);
    if known.is_some() {
        // `known` comes from a `stat` that found a regular file, whose reads come back short only at
        // its end: a file read whole by its first call needs no second call just to see the end
        // (one system call fewer per persona file). A file that grew is read on as usual.
        // Only bytes the reused buffer never held are zeroed; `read` overwrites the rest.
        bytes.resize(size + 1, 0);
        let n = read_retrying(&mut file, bytes).map_err(ReadError::Read)?;
        bytes.truncate(n);
        if n <= size {
            return Ok(());
        }
    } else {
        bytes.clear();
        bytes.reserve(size + 1);
    }
    file.read_to_end(bytes).map_err(ReadError::Read)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(())
}

/// One `read`, repeated if a signal interrupted it before anything was read.
fn read_retrying(file: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// UTF-8 text, or the offset of the first invalid byte.
pub fn decode(bytes: Vec<u8>) -> Result<String, NotUtf8> {
    String::from_utf8(bytes).map_err(|e| not_utf8(e.utf8_error()))
}

/// [`decode`] of borrowed bytes.
pub fn decode_str(bytes: &[u8]) -> Result<&str, NotUtf8> {
    std::str::from_utf8(bytes).map_err(not_utf8)
}

fn not_utf8(e: std::str::Utf8Error) -> NotUtf8 {
    NotUtf8 {
        at: e.valid_up_to(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_text_is_only_made_from_parts_of_its_text() {
        let text: Arc<str> = Arc::from("---\nname: é\n---\nbody\n");
        let part = SharedText::part_of(&text, &text[17..21]).unwrap();
        assert_eq!(&*part, "body");
        assert_eq!(part, SharedText::from("body".to_string()));
        assert_eq!(&*SharedText::part_of(&text, &text[..]).unwrap(), &*text);
        // Equal text elsewhere in memory is not a part of it.
        assert!(SharedText::part_of(&text, "body").is_none());
        let copy = String::from(&text[17..]);
        assert!(SharedText::part_of(&text, &copy).is_none());
    }

    #[test]
    fn locates_json_keys_in_nested_objects() {
        let text = r#"{ "name": "x", "defaults": { "name": 1, "temprature": 0.5 } }"#.to_string();
        let src = SourceFile::new("p.json", text.clone(), Syntax::Json);
        let (off, _) = src.locate(&["defaults", "temprature"]).unwrap();
        assert!(text[off..].starts_with("\"temprature\""));
        let (off, _) = src.locate(&["defaults", "name"]).unwrap();
        assert!(off > text.find("defaults").unwrap());
    }

    #[test]
    fn locates_yaml_keys_inside_frontmatter_only() {
        let text = "---\nname: a\ntriggers:\n  keywords: [x]\n---\nkeywords: body\n".to_string();
        let src = SourceFile::new("a.persona.md", text.clone(), Syntax::Yaml { offset: 4 });
        let (off, _) = src.locate(&["triggers", "keywords"]).unwrap();
        assert_eq!(crate::diag::line_col(&text, off), (4, 3));
        assert_eq!(src.locate(&["keywords"]), None);
    }

    #[test]
    fn suggests_near_misses_only() {
        let known = ["temperature", "model", "subscribe"];
        assert_eq!(
            suggest("temprature", &known).as_deref(),
            Some("temperature")
        );
        assert_eq!(suggest("colour", &known), None);
    }

    #[test]
    fn sized_reads_trust_the_file_not_the_stat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        // The right size, a stale smaller one (the file grew), a stale larger one (it shrank).
        for known in [Some(10), Some(3), Some(0), Some(64), None] {
            assert_eq!(
                read_limited_sized(&path, 100, known).unwrap(),
                b"0123456789",
                "{known:?}"
            );
        }
        // The limit holds whatever the stat said.
        for known in [Some(10), Some(3), Some(64), None] {
            let err = read_limited_sized(&path, 9, known).unwrap_err();
            assert_eq!(err.kind(), "too-large", "{known:?}: {err}");
            assert_eq!(err.to_string(), "file is larger than the 0 KiB limit");
        }
        assert_eq!(read_limited_sized(&path, 10, Some(10)).unwrap().len(), 10);
        std::fs::write(&path, b"").unwrap();
        assert!(read_limited_sized(&path, 10, Some(0)).unwrap().is_empty());
    }

    #[test]
    fn read_errors_keep_their_messages() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_limited(&dir.path().join("none"), 10).unwrap_err();
        assert_eq!(missing.kind(), "open");
        assert!(
            missing.to_string().starts_with("cannot open: "),
            "{missing}"
        );
        let not_a_file = read_limited(dir.path(), 10).unwrap_err();
        assert_eq!(not_a_file.kind(), "refused", "{not_a_file}");
        let bad = decode(vec![b'a', 0xff]).unwrap_err();
        assert_eq!(bad, NotUtf8 { at: 1 });
        assert_eq!(
            ReadError::from(bad).to_string(),
            "the file is not valid UTF-8 (invalid byte at offset 1)"
        );
    }
}
