//! What a one-shot command prints. A command returns an [`Outcome`]: a typed value with a human form
//! (text on stdout and stderr), a `--json` form (a document on stdout) and an exit code; [`render`]
//! prints one of the two forms and gives the code. Failures are outcomes too ([`Failed`]), so a
//! command can stop with `?`.

use std::io::{self, Write};

use serde::Serialize;

use super::{exit, pretty_json};
use crate::diag::Report;

/// What a command found or did.
pub(crate) trait Outcome {
    /// The form for people: lines on stdout and stderr.
    fn human(&self, to: &mut Human<'_>) -> io::Result<()>;

    /// The `--json` form, a document for stdout. `None`: this outcome is reported in its human form
    /// even under `--json`.
    fn json(&self) -> Option<&dyn Document>;

    /// 0 unless the outcome says otherwise.
    fn exit_code(&self) -> u8 {
        exit::OK
    }

    /// Under `--json`, what still goes to stderr for the person watching: a failure's text (the
    /// document on stdout is for scripts, as cargo's JSON messages are).
    fn json_stderr(&self, _err: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// A value written as pretty JSON (any [`Serialize`] type): the object-safe face of `Serialize`.
pub(crate) trait Document {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()>;
}

impl<T: Serialize> Document for T {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        pretty_json::write(out, self)
    }
}

/// Where the human form goes.
pub(crate) struct Human<'a> {
    /// stdout: what the command was asked for.
    pub out: &'a mut dyn Write,
    /// stderr: findings, progress, summaries and errors.
    pub err: &'a mut dyn Write,
    /// Reports on `err` may use colour (stderr is a terminal).
    pub color: bool,
}

impl Human<'_> {
    /// A report's findings on stderr.
    pub fn report(&mut self, report: &Report) -> io::Result<()> {
        self.err.write_all(report.render(self.color).as_bytes())
    }
}

impl<T: Outcome, E: Outcome> Outcome for Result<T, E> {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        match self {
            Ok(o) => o.human(to),
            Err(e) => e.human(to),
        }
    }

    fn json(&self) -> Option<&dyn Document> {
        match self {
            Ok(o) => o.json(),
            Err(e) => e.json(),
        }
    }

    fn exit_code(&self) -> u8 {
        match self {
            Ok(o) => o.exit_code(),
            Err(e) => e.exit_code(),
        }
    }

    fn json_stderr(&self, err: &mut dyn Write) -> io::Result<()> {
        match self {
            Ok(o) => o.json_stderr(err),
            Err(e) => e.json_stderr(err),
        }
    }
}

/// Prints `outcome` (its `--json` form with `json`, else its human form) and gives its exit code.
pub(crate) fn render(outcome: &dyn Outcome, json: bool) -> u8 {
    let written = match outcome.json().filter(|_| json) {
        Some(doc) => {
            // Streamed through one buffer: an inspect of a large pack is megabytes of JSON.
            let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
            doc.write_json(&mut out)
                .map_err(io::Error::from)
                .and_then(|()| writeln!(out))
                .and_then(|()| out.flush())
                .and_then(|()| outcome.json_stderr(&mut io::stderr().lock()))
        }
        None => {
            // Line-buffered stdout and unbuffered stderr, as `println!` and `eprintln!`: on one
            // terminal the two interleave in the order they were written.
            let (stdout, stderr) = (io::stdout(), io::stderr());
            let (mut out, mut err) = (stdout.lock(), stderr.lock());
            let mut to = Human {
                out: &mut out,
                err: &mut err,
                color: super::stderr_is_terminal(),
            };
            outcome.human(&mut to).and_then(|()| out.flush())
        }
    };
    if let Err(e) = written {
        eprintln!("error: could not write output: {e}");
    }
    outcome.exit_code()
}

/// A command that failed: text on stderr and an exit code, or with `--json` the one error shape
/// ([`ErrorJson`]) on stdout.
pub(crate) struct Failed {
    text: String,
    /// Boxed: a `Result<_, Failed>` stays small on the happy path.
    error: Box<NotOk>,
    code: u8,
}

/// `{"ok": false, "error": ...}`, the JSON of a refusal.
#[derive(Debug, Serialize)]
struct NotOk {
    ok: bool,
    error: ErrorJson,
}

/// The one JSON shape of a failure in every command's `--json` output (the codes are listed in
/// docs/reference/errors.md): `code` and `message` always, `help` and `diagnostics` when there are
/// some; `convert` keeps its context beside them (`converter`, `found`, `sandbox_code`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErrorJson {
    /// Stable, for scripts: `error` or `usage` unless the command has its own codes.
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<crate::diag::Diagnostic>>,
}

impl ErrorJson {
    pub fn new(code: impl std::fmt::Display, message: impl Into<String>) -> ErrorJson {
        ErrorJson {
            code: code.to_string(),
            message: message.into(),
            help: None,
            diagnostics: None,
        }
    }
}

impl Failed {
    /// `text` (whole lines) on stderr, exit code `code`; under `--json` the text is the message.
    pub fn text(code: u8, text: impl Into<String>) -> Failed {
        let text = text.into();
        let generic = if code == exit::USAGE {
            "usage"
        } else {
            "error"
        };
        let message = text
            .trim_end()
            .strip_prefix("error: ")
            .unwrap_or(text.trim_end());
        Failed {
            error: Box::new(NotOk {
                ok: false,
                error: ErrorJson::new(generic, message),
            }),
            text,
            code,
        }
    }

    /// `error: <message>`, exit code 1.
    pub fn error(message: impl std::fmt::Display) -> Failed {
        Failed::text(exit::FAILURE, format!("error: {message}\n"))
    }

    /// `error: <message>`, exit code 64 (the command line was wrong).
    pub fn usage(message: impl std::fmt::Display) -> Failed {
        Failed::text(exit::USAGE, format!("error: {message}\n"))
    }

    /// A report's findings (as stderr shows them), then `text`; exit code 1. Under `--json` the
    /// findings are the error's `diagnostics`.
    pub fn report(report: &Report, text: impl std::fmt::Display) -> Failed {
        let mut failed = Failed::text(exit::FAILURE, text.to_string());
        failed.text = format!("{}{text}", report.render(super::stderr_is_terminal()));
        failed.error.error.diagnostics = Some(report.diagnostics.clone());
        failed
    }

    /// The text as stderr shows it.
    pub fn message(&self) -> &str {
        &self.text
    }

    /// This failure's text, then `next`'s (two mistakes on one command line).
    pub fn and(mut self, next: Failed) -> Failed {
        self.text.push_str(&next.text);
        let message = &mut self.error.error.message;
        message.push('\n');
        message.push_str(&next.error.error.message);
        self
    }

    /// Under `--json`, this error instead of the generic one (the text on stderr stays).
    pub fn with_json(mut self, error: ErrorJson) -> Failed {
        self.error.error = error;
        self
    }

    /// The stable code scripts see under `--json`.
    pub fn with_code(mut self, code: impl std::fmt::Display) -> Failed {
        self.error.error.code = code.to_string();
        self
    }
}

/// Its text, as stderr shows it (for tests' `unwrap`).
impl std::fmt::Debug for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Outcome for Failed {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        to.err.write_all(self.text.as_bytes())
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(&*self.error)
    }

    fn json_stderr(&self, err: &mut dyn Write) -> io::Result<()> {
        err.write_all(self.text.as_bytes())
    }

    fn exit_code(&self) -> u8 {
        self.code
    }
}

/// Runs a command's outcome through both forms into memory: (stdout, stderr) of the human form,
/// the JSON text, and the exit code. For tests.
#[cfg(test)]
pub(crate) fn capture(outcome: &dyn Outcome) -> (String, String, Option<String>, u8) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    outcome
        .human(&mut Human {
            out: &mut out,
            err: &mut err,
            color: false,
        })
        .unwrap();
    let json = outcome.json().map(|doc| {
        let mut text = Vec::new();
        doc.write_json(&mut text).unwrap();
        String::from_utf8(text).unwrap()
    });
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
        json,
        outcome.exit_code(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_prints_its_text_or_the_one_error_shape() {
        let f = Failed::usage("--agent is empty");
        let (out, err, json, code) = capture(&f);
        assert_eq!(
            (out.as_str(), err.as_str()),
            ("", "error: --agent is empty\n")
        );
        let v: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ok": false, "error": {"code": "usage", "message": "--agent is empty"}})
        );
        assert_eq!(code, exit::USAGE);
    }

    #[test]
    fn a_failure_with_its_own_code_and_help_keeps_the_shape() {
        let mut e = ErrorJson::new("component.not-found", "no such component");
        e.help = Some("apiary component list".into());
        let f = Failed::error("no such component").with_json(e);
        let (_, err, json, code) = capture(&f);
        assert_eq!(err, "error: no such component\n");
        let v: serde_json::Value = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(v["error"]["code"], "component.not-found");
        assert_eq!(v["error"]["message"], "no such component");
        assert_eq!(v["error"]["help"], "apiary component list");
        assert_eq!(code, exit::FAILURE);
    }

    #[test]
    fn a_result_is_the_outcome_it_holds() {
        let r: Result<Failed, Failed> = Err(Failed::text(3, "three\n"));
        assert_eq!(capture(&r).3, 3);
    }
}
