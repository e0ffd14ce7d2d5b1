//! Diagnostics: what validation found, where, and how to show it to a person or a script.
//!
//! Every finding names its file (relative to the pack root) and, when it can, the line, column and a
//! byte span so the human renderer can print a source snippet. The JSON form is a stable contract.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Information that never changes the exit code (e.g. which `${VAR}`s a pack needs).
    Note,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `persona.unknown-key`.
    pub code: &'static str,
    pub message: String,
    /// Path relative to the pack root (or as given, for files outside any pack).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    #[serde(skip)]
    pub span: Option<(usize, usize)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(severity: Severity, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            file: None,
            line: None,
            column: None,
            span: None,
            help: None,
        }
    }
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, message)
    }
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, message)
    }
    pub fn note(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Note, code, message)
    }
    pub fn in_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = Some(file.into());
        self
    }
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    /// Attach a location given as a byte span in the file's text.
    pub fn at(mut self, text: &str, offset: usize, len: usize) -> Self {
        let offset = offset.min(text.len());
        let (line, column) = line_col(text, offset);
        self.line = Some(line);
        self.column = Some(column);
        self.span = Some((offset, len.min(text.len() - offset)));
        self
    }
    /// Attach a location given as 1-based line and column (e.g. from a parser error).
    pub fn at_line_col(mut self, text: &str, line: usize, column: usize) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        if let Some(start) = line_start(text, line) {
            let line_len = text[start..].find('\n').unwrap_or(text.len() - start);
            let col_off = column.saturating_sub(1).min(line_len);
            self.span = Some((start + col_off, 1.min(line_len - col_off)));
        }
        self
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_begin = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_begin..].chars().count() + 1)
}

fn line_start(text: &str, line: usize) -> Option<usize> {
    if line == 0 {
        return None;
    }
    let mut start = 0;
    for _ in 1..line {
        start += text[start..].find('\n')? + 1;
    }
    Some(start)
}

/// All the findings of one run, plus the source texts the snippets are cut from.
#[derive(Debug, Default)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    /// Looked up only to render a diagnostic, but registered for every file read: a list, not a
    /// map, so that a clean 200-persona load pays no hashing of paths. The latest entry wins.
    sources: Vec<(PathBuf, Arc<str>)>,
}

impl Report {
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
    /// Remember a file's text so its diagnostics can show a snippet.
    pub fn add_source(&mut self, file: &Path, text: &str) {
        self.sources.push((file.to_path_buf(), Arc::from(text)));
    }
    /// Like [`Report::add_source`], without copying text the caller already shares.
    pub fn add_shared_source(&mut self, file: &Path, text: Arc<str>) {
        self.sources.push((file.to_path_buf(), text));
    }
    /// The registered text of `file`, shared.
    pub fn shared_source(&self, file: &Path) -> Option<Arc<str>> {
        self.find_source(file).cloned()
    }
    /// The registered text of `file`, if any.
    pub fn source(&self, file: &Path) -> Option<&str> {
        self.find_source(file).map(|s| &**s)
    }
    fn find_source(&self, file: &Path) -> Option<&Arc<str>> {
        self.sources
            .iter()
            .rev()
            .find_map(|(f, text)| (f == file).then_some(text))
    }
    pub fn extend(&mut self, other: Report) {
        self.diagnostics.extend(other.diagnostics);
        self.sources.extend(other.sources);
    }
    pub fn errors(&self) -> usize {
        self.count(Severity::Error)
    }
    pub fn warnings(&self) -> usize {
        self.count(Severity::Warning)
    }
    pub fn has_errors(&self) -> bool {
        self.errors() > 0
    }
    fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
    /// 0 clean, 1 errors, 2 warnings only.
    pub fn exit_code(&self) -> i32 {
        if self.has_errors() {
            1
        } else if self.warnings() > 0 {
            2
        } else {
            0
        }
    }
    /// Errors first, then warnings, then notes; within a severity, by file and line.
    pub fn sort(&mut self) {
        self.diagnostics
            .sort_by(|a, b| (a.severity, &a.file, a.line).cmp(&(b.severity, &b.file, b.line)));
    }

    /// Human rendering with source snippets (miette's graphical handler).
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        let handler = miette::GraphicalReportHandler::new_themed(theme).with_context_lines(1);
        let mut out = String::new();
        for d in &self.diagnostics {
            let rendered = RenderedDiagnostic::new(d, self.source_of(d));
            if handler.render_report(&mut out, &rendered).is_err() {
                let _ = writeln!(out, "{}: {}", severity_word(d.severity), d.message);
            }
        }
        out
    }

    fn source_of(&self, d: &Diagnostic) -> Option<Arc<str>> {
        d.file.as_ref().and_then(|f| self.find_source(f)).cloned()
    }
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// Adapter from our plain diagnostic to miette's trait, built only when rendering.
#[derive(Debug)]
struct RenderedDiagnostic {
    headline: String,
    severity: miette::Severity,
    code: &'static str,
    help: Option<String>,
    source: Option<miette::NamedSource<String>>,
    label: Option<miette::LabeledSpan>,
}

impl RenderedDiagnostic {
    fn new(d: &Diagnostic, text: Option<Arc<str>>) -> Self {
        let location = match (&d.file, d.line, d.column) {
            (Some(f), Some(l), Some(c)) => format!("{}:{l}:{c}: ", f.display()),
            (Some(f), Some(l), None) => format!("{}:{l}: ", f.display()),
            (Some(f), None, _) => format!("{}: ", f.display()),
            _ => String::new(),
        };
        let (source, label) = match (text, d.span, &d.file) {
            (Some(text), Some((off, len)), Some(file)) => (
                Some(miette::NamedSource::new(
                    file.display().to_string(),
                    text.to_string(),
                )),
                Some(miette::LabeledSpan::new_with_span(None, (off, len))),
            ),
            _ => (None, None),
        };
        RenderedDiagnostic {
            headline: format!("{location}{}", d.message),
            severity: match d.severity {
                Severity::Error => miette::Severity::Error,
                Severity::Warning => miette::Severity::Warning,
                Severity::Note => miette::Severity::Advice,
            },
            code: d.code,
            help: d.help.clone(),
            source,
            label,
        }
    }
}

impl std::fmt::Display for RenderedDiagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.headline)
    }
}

impl std::error::Error for RenderedDiagnostic {}

impl miette::Diagnostic for RenderedDiagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.label
            .clone()
            .map(|l| Box::new(std::iter::once(l)) as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one_and_in_chars() {
        let text = "ab\nçd\nef";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 5), (2, 2)); // after the two-byte ç
        assert_eq!(line_col(text, 999), (3, 3));
    }

    #[test]
    fn exit_code_follows_worst_severity() {
        let mut r = Report::default();
        assert_eq!(r.exit_code(), 0);
        r.push(Diagnostic::note("n", "x"));
        assert_eq!(r.exit_code(), 0);
        r.push(Diagnostic::warning("w", "x"));
        assert_eq!(r.exit_code(), 2);
        r.push(Diagnostic::error("e", "x"));
        assert_eq!(r.exit_code(), 1);
    }
}
