//! What this machine can enforce, found by doing it: a launcher started with `--probe` isolates its
//! network, restricts itself with Landlock and installs the seccomp filter, then reports each step.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The confinement steps that work here, and why the others do not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Support {
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Landlock restricted a process here.
    pub files: bool,
    /// A network namespace with its loopback up was made here.
    pub network: bool,
    /// The seccomp filter was installed here.
    pub seccomp: bool,
    /// One line for each step that failed.
    pub problems: Vec<String>,
}

impl Support {
    /// Everything an agent's confinement needs.
    pub fn complete(&self) -> bool {
        self.files && self.network && self.seccomp
    }

    /// Runs `launcher` (apiary's own binary) as a probe.
    pub fn detect(launcher: &Path) -> Support {
        let out = Command::new(launcher)
            .args([crate::LAUNCH_ARG, crate::PROBE_ARG])
            .env_clear()
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| Support::failed(format!("the probe's answer: {e}"))),
            Ok(out) => Support::failed(format!("the probe exited with {}", out.status)),
            Err(e) => Support::failed(format!("cannot run {}: {e}", launcher.display())),
        }
    }

    fn failed(why: String) -> Support {
        Support {
            problems: vec![why],
            ..Support::default()
        }
    }
}

/// The probe's own steps, printed as JSON on stdout (in the probing launcher).
#[cfg(target_os = "linux")]
pub fn print_own() {
    let mut support = Support {
        landlock_abi: crate::fs_rules::kernel_abi(),
        ..Support::default()
    };
    match crate::netns::isolate() {
        Ok(()) => support.network = true,
        Err(e) => support.problems.push(e.to_string()),
    }
    if support.landlock_abi < crate::fs_rules::ABI_NEEDED {
        support.problems.push(format!(
            "Landlock ABI {} (version {} or newer is needed; Linux 6.2+ with Landlock enabled)",
            support.landlock_abi,
            crate::fs_rules::ABI_NEEDED
        ));
    } else {
        match crate::fs_rules::restrict(&crate::Plan::default()) {
            Ok(()) => support.files = true,
            Err(e) => support.problems.push(e.to_string()),
        }
    }
    match crate::seccomp::program().and_then(|p| {
        crate::seccomp::apply(&p).map_err(|e| crate::ConfineError::Seccomp(e.to_string()))
    }) {
        Ok(()) => support.seccomp = true,
        Err(e) => support.problems.push(e.to_string()),
    }
    println!("{}", serde_json::to_string(&support).expect("serialises"));
}
