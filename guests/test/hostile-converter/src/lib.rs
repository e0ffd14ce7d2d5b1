//! `hostile-converter`: a converter that misbehaves on request, for the host's containment tests.
//! It reads `hostile -> hostile-out` and `hostile -> buzz-pack`; the first line of `/input/mode`
//! (or the `mode` option) picks the misbehaviour, and any other mode converts nothing, well-behaved.
//! It also reads `buzz-pack -> pack-listing` (a file listing the pack, with one `lost` finding), so
//! the host's chaining `hostile -> buzz-pack -> pack-listing` can be tested.
//!
//! Filesystem probes never trap: the converter answers `Err("blocked: …")` when the sandbox
//! refused every attempt, and `Err("ESCAPED: …")` when one got through (a test treats that as a
//! sandbox failure).

use std::hint::black_box;
use std::io::Write;

use apiary_guest_sdk::converter::{
    Conversion, Converter, ConverterInfo, Detection, Finding, Report, Request,
};

struct Hostile;

fn finding(i: usize) -> Finding {
    Finding {
        code: "flood".into(),
        path: format!("file-{i}"),
        field: String::new(),
        message: "one of very many".into(),
    }
}

fn empty() -> Report {
    Report {
        lost: vec![],
        synthesised: vec![],
        normalised: vec![],
        reinterpreted: vec![],
    }
}

fn probe_reads(paths: &[&str]) -> Result<Report, String> {
    let mut refused = Vec::new();
    for path in paths {
        match std::fs::read(path) {
            Ok(bytes) => return Err(format!("ESCAPED: read {} bytes from {path}", bytes.len())),
            Err(e) => refused.push(format!("{path}: {e}")),
        }
    }
    Err(format!("blocked: {}", refused.join("; ")))
}

fn probe_writes(paths: &[&str]) -> Result<Report, String> {
    let mut refused = Vec::new();
    for path in paths {
        match std::fs::write(path, b"pwned") {
            Ok(()) => return Err(format!("ESCAPED: wrote {path}")),
            Err(e) => refused.push(format!("{path}: {e}")),
        }
    }
    Err(format!("blocked: {}", refused.join("; ")))
}

fn mode(request: &Request) -> String {
    if let Some((_, v)) = request.options.iter().find(|(k, _)| k == "mode") {
        return v.clone();
    }
    std::fs::read_to_string("/input/mode")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

impl Converter for Hostile {
    fn info() -> ConverterInfo {
        let pair = |t: &str| Conversion {
            source: "hostile".into(),
            target: t.into(),
        };
        ConverterInfo {
            name: "hostile-converter".into(),
            version: "0.1.0".into(),
            conversions: vec![
                pair("hostile-out"),
                pair("buzz-pack"),
                Conversion {
                    source: "buzz-pack".into(),
                    target: "pack-listing".into(),
                },
            ],
        }
    }

    fn detect() -> Vec<Detection> {
        let marked = std::fs::metadata("/input/mode").is_ok();
        vec![Detection {
            format: "hostile".into(),
            confidence: if marked { 0.9 } else { 0.0 },
            evidence: "found /input/mode".into(),
        }]
    }

    fn convert(request: Request) -> Result<Report, String> {
        if request.source == "buzz-pack" {
            return listing();
        }
        match mode(&request).as_str() {
            "read-outside" => probe_reads(&[
                "/input/../secret",
                "/input/../../etc/passwd",
                "/etc/passwd",
                "../secret",
                "/output/../input/mode/../../etc/hostname",
            ]),
            "write-outside" => probe_writes(&[
                "/input/../x",
                "/output/../x",
                "/x",
                "/tmp/x",
                "/input/planted",
            ]),
            "symlink-out" => symlink_out(),
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "flood-stdout" => flood_stdout(),
            // More findings than the host accepts in one report.
            "giant-report" => Ok(Report {
                lost: (0..200_000).map(finding).collect(),
                ..empty()
            }),
            // A huge error message.
            "giant-error" => Err("e".repeat(8 << 20)),
            "invalid-pack" => invalid_pack(),
            "valid-pack" => valid_pack(),
            "lossy" => lossy(),
            _ => escapes(),
        }
    }
}

/// Symlinks in /output pointing out; if the sandbox lets one be created, the host must refuse
/// the output.
fn symlink_out() -> Result<Report, String> {
    let mut made = Vec::new();
    let dirs = wasip2::filesystem::preopens::get_directories();
    if let Some((output, _)) = dirs.iter().find(|(_, p)| p == "/output") {
        for (i, target) in [
            "/etc/passwd",
            "../../../../etc/passwd",
            "../input",
            "ok.txt",
        ]
        .iter()
        .enumerate()
        {
            if output.symlink_at(target, &format!("link-{i}")).is_ok() {
                made.push(*target);
            }
        }
    }
    std::fs::write("/output/ok.txt", "fine").map_err(|e| e.to_string())?;
    if made.is_empty() {
        Err("blocked: no symlink could be created".into())
    } else {
        Ok(empty())
    }
}

/// 16 MiB to stdout, then a normal answer.
fn flood_stdout() -> Result<Report, String> {
    let line = [b'x'; 1024];
    let mut out = std::io::stdout();
    for _ in 0..(16 << 10) {
        let _ = out.write_all(&line);
    }
    std::fs::write("/output/ok.txt", "fine").map_err(|e| e.to_string())?;
    Ok(empty())
}

/// A tree the pack validator rejects: a manifest with no personas and a bad id.
fn invalid_pack() -> Result<Report, String> {
    std::fs::create_dir_all("/output/.plugin").map_err(|e| e.to_string())?;
    std::fs::write(
        "/output/.plugin/plugin.json",
        r#"{"id": "not a valid id!", "personas": ["agents/ghost.persona.md"]}"#,
    )
    .map_err(|e| e.to_string())?;
    Ok(empty())
}

/// A minimal valid persona pack.
fn valid_pack() -> Result<Report, String> {
    let write = |p: &str, t: &str| {
        let p = format!("/output/{p}");
        let dir = p
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default();
        std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&p, t))
    };
    write(
        ".plugin/plugin.json",
        r#"{"id": "com.example.hostile", "name": "Hostile", "version": "1.0.0", "description": "from the hostile converter", "personas": ["agents/pip.persona.md"]}"#,
    )
    .and_then(|()| {
        write(
            "agents/pip.persona.md",
            "---\nname: pip\ndisplay_name: Pip\ndescription: test persona\n---\nYou are Pip.\n",
        )
    })
    .map_err(|e| e.to_string())?;
    Ok(Report {
        synthesised: vec![Finding {
            code: "default-applied".into(),
            path: ".plugin/plugin.json".into(),
            field: "version".into(),
            message: "version set to 1.0.0".into(),
        }],
        ..empty()
    })
}

/// A normal answer that reports a loss.
fn lossy() -> Result<Report, String> {
    std::fs::write("/output/ok.txt", "fine").map_err(|e| e.to_string())?;
    Ok(Report {
        lost: vec![Finding {
            code: "no-slot".into(),
            path: "mode".into(),
            field: "colour".into(),
            message: "the target has no place for a colour".into(),
        }],
        ..empty()
    })
}

/// Escape characters in report text must not reach the operator's terminal.
fn escapes() -> Result<Report, String> {
    std::fs::write("/output/ok.txt", "fine").map_err(|e| e.to_string())?;
    Ok(Report {
        normalised: vec![Finding {
            code: "calm".into(),
            path: "ok.txt".into(),
            field: String::new(),
            message: "written \u{1b}[31mred\u{1b}[0m".into(),
        }],
        ..empty()
    })
}

/// `buzz-pack -> pack-listing`: the files of the pack, one per line.
fn listing() -> Result<Report, String> {
    fn walk(dir: &str, out: &mut Vec<String>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let path = format!("{dir}/{}", e.file_name().to_string_lossy());
            if e.file_type()?.is_dir() {
                walk(&path, out)?;
            } else {
                out.push(path.trim_start_matches("/input/").to_string());
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk("/input", &mut files).map_err(|e| format!("cannot list /input: {e}"))?;
    files.sort();
    std::fs::write("/output/listing.txt", files.join("\n")).map_err(|e| e.to_string())?;
    Ok(Report {
        lost: vec![Finding {
            code: "contents-dropped".into(),
            path: String::new(),
            field: String::new(),
            message: "only file names are kept".into(),
        }],
        ..empty()
    })
}

apiary_guest_sdk::export_converter!(Hostile);
