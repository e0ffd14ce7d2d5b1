//! One conversion request, the single entry shape of every built-in converter:
//! `pub fn convert(job: &Job) -> Result<Report, String>`.
//!
//! The component export builds a job over the preopened `/input` and `/output`
//! ([`Job::preopened`]); native tests and tools build one over temp dirs, so the same function
//! runs in both.

use std::path::Path;

use apiary_guest_sdk::converter::{INPUT, OUTPUT, Request};

/// What to convert, from where, to where.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// The input format id.
    pub source: &'a str,
    /// The output format id.
    pub target: &'a str,
    /// `apiary convert --option key=value`, in command-line order. The host passes every option
    /// of a run to every converter of its chain.
    pub options: &'a [(String, String)],
    /// The input tree (read-only).
    pub input: &'a Path,
    /// The output directory (empty at the start).
    pub output: &'a Path,
}

impl<'a> Job<'a> {
    /// The job a component gets: `request` over the preopened [`INPUT`] and [`OUTPUT`].
    pub fn preopened(request: &'a Request) -> Job<'a> {
        Job {
            source: &request.source,
            target: &request.target,
            options: &request.options,
            input: Path::new(INPUT),
            output: Path::new(OUTPUT),
        }
    }

    /// The value of option `key` (the first given), if any.
    pub fn option(&self, key: &str) -> Option<&'a str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The error for a conversion `converter` does not do, naming the ones it does
    /// (`(source, target)`), so the operator sees what to ask for instead.
    pub fn unsupported(&self, converter: &str, conversions: &[(&str, &str)]) -> String {
        let does: Vec<String> = conversions
            .iter()
            .map(|(source, target)| format!("{source} -> {target}"))
            .collect();
        format!(
            "{converter} does not convert {} -> {} (it does {})",
            self.source,
            self.target,
            does.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_the_unsupported_message() {
        let options = vec![
            ("plugin".to_string(), "a".to_string()),
            ("plugin".to_string(), "b".to_string()),
        ];
        let job = Job {
            source: "x",
            target: "y",
            options: &options,
            input: Path::new("in"),
            output: Path::new("out"),
        };
        assert_eq!(job.option("plugin"), Some("a"));
        assert_eq!(job.option("name"), None);
        assert_eq!(
            job.unsupported("converter-z", &[("a", "b"), ("b", "a")]),
            "converter-z does not convert x -> y (it does a -> b, b -> a)"
        );
    }

    #[test]
    fn a_component_job_reads_the_preopens() {
        let request = Request {
            source: "a".into(),
            target: "b".into(),
            options: vec![("k".into(), "v".into())],
        };
        let job = Job::preopened(&request);
        assert_eq!((job.source, job.target), ("a", "b"));
        assert_eq!(job.option("k"), Some("v"));
        assert_eq!(job.input, Path::new(INPUT));
        assert_eq!(job.output, Path::new(OUTPUT));
    }
}
