//! The conversion report: everything not carried over verbatim, in exactly one of four lists.
//! Build it with the four methods named after the lists, e.g.
//! `report.normalised("case-folded", "a.txt", "", "text upper-cased")`.

/// One thing the conversion did not carry across unchanged (mirrors the WIT `finding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable kebab-case code, e.g. `unknown-field`, `name-normalised`.
    pub code: String,
    /// File inside the input (or output) tree, relative and `/`-separated.
    pub path: String,
    /// Dotted field within that file; empty for the whole file.
    pub field: String,
    /// One sentence for the operator.
    pub message: String,
}

/// What a conversion changed (mirrors the WIT `report`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub lost: Vec<Finding>,
    pub synthesised: Vec<Finding>,
    pub normalised: Vec<Finding>,
    pub reinterpreted: Vec<Finding>,
}

impl Finding {
    pub fn new(code: &str, path: &str, field: &str, message: impl Into<String>) -> Finding {
        Finding {
            code: code.to_string(),
            path: path.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

fn finding(code: &str, path: &str, field: &str, message: impl Into<String>) -> Finding {
    Finding::new(code, path, field, message)
}

impl Report {
    /// An input field with no place in the output: dropped.
    pub fn lost(&mut self, code: &str, path: &str, field: &str, message: impl Into<String>) {
        self.lost.push(finding(code, path, field, message));
    }

    /// An output field the input did not have.
    pub fn synthesised(&mut self, code: &str, path: &str, field: &str, message: impl Into<String>) {
        self.synthesised.push(finding(code, path, field, message));
    }

    /// A value carried over in a canonical spelling.
    pub fn normalised(&mut self, code: &str, path: &str, field: &str, message: impl Into<String>) {
        self.normalised.push(finding(code, path, field, message));
    }

    /// A value carried over with a changed meaning.
    pub fn reinterpreted(
        &mut self,
        code: &str,
        path: &str,
        field: &str,
        message: impl Into<String>,
    ) {
        self.reinterpreted.push(finding(code, path, field, message));
    }

    /// Appends another report's findings (e.g. from reading the input) to this one.
    pub fn extend(&mut self, other: Report) {
        self.lost.extend(other.lost);
        self.synthesised.extend(other.synthesised);
        self.normalised.extend(other.normalised);
        self.reinterpreted.extend(other.reinterpreted);
    }

    /// Total number of findings.
    pub fn len(&self) -> usize {
        self.lost.len() + self.synthesised.len() + self.normalised.len() + self.reinterpreted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
