//! `apiary up` on a terminal: the live status view, through the real binary on a pseudo-terminal
//! (util-linux `script`), with the bundled example pack, the embedded relay and the bundled agent.
//! A mention shows as one reply on the persona's row; a Ctrl-C typed at the terminal while a turn is
//! in flight drains it (its reply is published), restores the terminal and exits 0. `--plain` on the
//! same terminal prints the plain lines instead.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiary_e2e::{apiary, apiary_bin, data_dir, on_terminal, wait_exit};

use crate::support::live::{WAIT, post};

const COLS: usize = 120;

/// `apiary up` on a pseudo-terminal of [`COLS`]×40, its screen output collected as it comes.
struct Terminal {
    child: Child,
    /// Bytes typed at the terminal.
    keys: ChildStdin,
    screen: Arc<Mutex<Vec<u8>>>,
    home: std::path::PathBuf,
}

impl Terminal {
    /// `None` when `script` (util-linux) is missing: the test is skipped with a note.
    fn start(home: &Path, up_args: &str) -> Option<Terminal> {
        if Command::new("script").arg("--version").output().is_err() {
            eprintln!("skipped: `script` (util-linux) is not installed");
            return None;
        }
        let line = format!(
            "stty cols {COLS} rows 40; exec '{}' up --listen 127.0.0.1:0 --ephemeral --drain-timeout 20 {up_args}",
            apiary_bin().display()
        );
        // The environment of the other e2e tests (scratch HOME, no inherited runtime variables).
        let mut cmd = on_terminal(&apiary(home), &line);
        cmd.env("TERM", "xterm-256color")
            .env("APIARY_AGENT_SLOW_MS", "3000");
        let mut child = cmd.spawn().expect("spawn script");
        let keys = child.stdin.take().expect("stdin");
        let mut out = child.stdout.take().expect("stdout");
        let screen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Some(Terminal {
            child,
            keys,
            screen,
            home: home.to_path_buf(),
        })
    }

    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Everything shown so far as text lines (escape sequences removed).
    fn lines(&self) -> Vec<String> {
        plain_lines(&self.raw())
    }

    /// Waits (bounded) until the latest drawn row of `persona` satisfies `pred`.
    fn wait_row(&self, persona: &str, what: &str, pred: impl Fn(&Row) -> bool) -> Row {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(row) = last_row(&self.lines(), persona)
                && pred(&row)
            {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {persona} to be {what}; screen:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn relay_url(&self) -> String {
        let file = data_dir(&self.home).join("relay.url");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(url) = std::fs::read_to_string(&file)
                && !url.trim().is_empty()
            {
                return url.trim().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "no relay.url; screen:\n{}",
                self.raw()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn post(&self, text: &str) -> String {
        post(&self.home, &self.relay_url(), "general", text, &[])
    }

    /// Types Ctrl-C at the terminal (the tty sends SIGINT to `apiary up`) and waits for the exit.
    fn interrupt(&mut self) -> i32 {
        self.keys.write_all(b"\x03").expect("type Ctrl-C");
        self.keys.flush().unwrap();
        let Some(status) = wait_exit(&mut self.child, WAIT) else {
            let _ = self.child.kill();
            panic!(
                "apiary up did not stop after Ctrl-C; screen:\n{}",
                self.raw()
            );
        };
        // The reader thread gets the last bytes.
        std::thread::sleep(Duration::from_millis(300));
        status.code().unwrap_or(-1)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One persona's row, by column name.
#[derive(Debug)]
struct Row(Vec<(String, String)>);

impl Row {
    fn get(&self, column: &str) -> &str {
        self.0
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }
}

/// The last row drawn for `persona`, read against the table header drawn before it.
fn last_row(lines: &[String], persona: &str) -> Option<Row> {
    let at = lines
        .iter()
        .rposition(|l| l.split_whitespace().next() == Some(persona))?;
    let header = lines[..at]
        .iter()
        .rfind(|l| l.starts_with("PERSONA "))?
        .split_whitespace()
        .collect::<Vec<_>>();
    let cells = lines[at].split_whitespace().map(String::from);
    Some(Row(header
        .iter()
        .map(|h| h.to_string())
        .zip(cells)
        .collect()))
}

/// Terminal output as text lines: CSI sequences and other escapes dropped (cursor home and a switch
/// of screen start a line: each frame of the view begins with the one, the final table with the
/// other), `\r` ignored.
fn plain_lines(raw: &str) -> Vec<String> {
    let mut text = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.next() == Some('[') {
                    let mut params = String::new();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            if c == 'H' || params == "?1049" {
                                text.push('\n');
                            }
                            break;
                        }
                        params.push(c);
                    }
                }
            }
            '\r' => {}
            c => text.push(c),
        }
    }
    text.lines().map(String::from).collect()
}

#[test]
fn status_view_counts_a_reply_and_ctrl_c_drains_and_restores_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    let Some(mut term) = Terminal::start(home.path(), "") else {
        return;
    };
    // The bundled Hello Hive pack: bee (mentions, "honey") and sage.
    term.wait_row("bee", "ready", |r| r.get("STATE") == "ready");
    term.wait_row("sage", "ready", |r| r.get("STATE") == "ready");

    term.post("hello @bee, anyone home?");
    let bee = term.wait_row("bee", "answered once", |r| r.get("REPLY") == "1");
    assert_eq!(bee.get("WAKE"), "1", "{bee:?}");
    assert_eq!(bee.get("QUEUE"), "0", "{bee:?}");
    let sage = last_row(&term.lines(), "sage").unwrap();
    assert_eq!(sage.get("SKIP"), "1", "{sage:?}");
    assert_eq!(sage.get("REPLY"), "0", "{sage:?}");

    // A slow turn in flight when Ctrl-C comes: drained, answered, then a clean exit.
    term.post("@bee take your time !slow");
    term.wait_row("bee", "busy", |r| r.get("STATE") == "busy");
    let code = term.interrupt();
    let raw = term.raw();
    assert_eq!(code, 0, "screen:\n{raw}");

    // The terminal is given back: the alternate screen left, the cursor and line wrapping back on,
    // after the last time the view hid them.
    let hidden = raw.rfind("\x1b[?25l").expect("the view hid the cursor");
    let rest = &raw[hidden..];
    for restore in ["\x1b[?1049l", "\x1b[?25h", "\x1b[?7h"] {
        assert!(rest.contains(restore), "{restore:?} missing: {rest:?}");
    }
    // The final table, printed on the normal screen, and the drain's outcome in its log.
    let after = plain_lines(&raw[hidden + raw[hidden..].find("\x1b[?1049l").unwrap()..]);
    assert!(
        after
            .iter()
            .any(|l| l.starts_with("apiary up  stopped  relay ws://")),
        "{after:#?}"
    );
    let bee = last_row(&after, "bee").expect("bee's final row");
    assert_eq!(bee.get("STATE"), "stopped", "{after:#?}");
    assert_eq!(bee.get("REPLY"), "2", "{after:#?}");
    assert_eq!(bee.get("QUEUE"), "0", "{after:#?}");
    assert!(
        after.iter().any(|l| l.trim() == "stopped replies=2"),
        "{after:#?}"
    );
    // Nothing drawn is wider than the terminal. The tty's own echo of the Ctrl-C (`^C`) lands
    // wherever the cursor is, e.g. after a full-width line; it is not apiary's output.
    for line in plain_lines(&raw) {
        let drawn = line.replace("^C", "");
        assert!(drawn.chars().count() <= COLS, "{line:?}");
    }
}

#[test]
fn plain_on_a_terminal_prints_lines_without_the_view() {
    let home = tempfile::tempdir().unwrap();
    let Some(mut term) = Terminal::start(home.path(), "--plain") else {
        return;
    };
    let deadline = Instant::now() + WAIT;
    while !term
        .lines()
        .iter()
        .any(|l| l.starts_with("ready personas=2"))
    {
        assert!(Instant::now() < deadline, "no ready line:\n{}", term.raw());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(term.interrupt(), 0, "{}", term.raw());
    let raw = term.raw();
    assert!(!raw.contains("\x1b[?1049h"), "{raw:?}");
    assert!(!raw.contains("PERSONA "), "{raw:?}");
    let lines = term.lines();
    // Stdout's lines (stderr's logs share the terminal, and the tty echoes the ^C).
    assert!(
        lines.iter().any(|l| l.starts_with("relay ws://127.0.0.1:")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("stopped replies=0")),
        "{lines:#?}"
    );
}
