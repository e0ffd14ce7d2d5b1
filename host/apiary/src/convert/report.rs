//! The conversion report as the host hands it on: every converter's findings in one place, each
//! tagged with the step (and converter) that produced it. Strings from a component are untrusted:
//! they are cut to a sane length and stripped of control characters before anyone prints them.

use serde::Serialize;

use crate::sandbox::converter::{Finding as GuestFinding, Report as GuestReport};

const MAX_CODE: usize = 64;
const MAX_TEXT: usize = 1024;

/// One finding, with the step that produced it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// 1-based step number in the chain.
    pub step: usize,
    pub converter: String,
    pub code: String,
    pub path: String,
    pub field: String,
    pub message: String,
}

/// Lost, synthesised, normalised and reinterpreted findings over every step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub lost: Vec<Finding>,
    pub synthesised: Vec<Finding>,
    pub normalised: Vec<Finding>,
    pub reinterpreted: Vec<Finding>,
}

impl Report {
    /// Appends one step's report.
    pub fn add(&mut self, step: usize, converter: &str, r: GuestReport) {
        let tag = |list: Vec<GuestFinding>| -> Vec<Finding> {
            list.into_iter()
                .map(|f| Finding {
                    step,
                    converter: converter.to_string(),
                    code: clean(&f.code, MAX_CODE),
                    path: clean(&f.path, MAX_TEXT),
                    field: clean(&f.field, MAX_TEXT),
                    message: clean(&f.message, MAX_TEXT),
                })
                .collect()
        };
        self.lost.extend(tag(r.lost));
        self.synthesised.extend(tag(r.synthesised));
        self.normalised.extend(tag(r.normalised));
        self.reinterpreted.extend(tag(r.reinterpreted));
    }

    pub fn groups(&self) -> [(&'static str, &[Finding]); 4] {
        [
            ("lost", &self.lost),
            ("synthesised", &self.synthesised),
            ("normalised", &self.normalised),
            ("reinterpreted", &self.reinterpreted),
        ]
    }

    pub fn len(&self) -> usize {
        self.groups().iter().map(|(_, l)| l.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// At most `max` bytes of `s`, control characters (terminal escapes included) replaced.
pub fn clean(s: &str, max: usize) -> String {
    let cut = crate::sandbox::truncate(s, max);
    let mut out: String = cut
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if cut.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn clean_strips_escapes_and_cuts() {
        assert_eq!(clean("a\x1b[31mb\nc", 100), "a [31mb c");
        assert_eq!(clean("abcdef", 3), "abc…");
    }
}
