//! `apiary up`'s live status view on a terminal: a printer thread folds the harness's notes into a
//! [`Status`] and redraws it in place (the terminal's alternate screen, cursor home, clear to end;
//! at most [`FRAME`] apart), with the latest plain lines under the table. On the way out it leaves
//! the alternate screen and prints the final table, so the run's outcome stays in the scrollback.
//!
//! While the view is up, whatever the process writes to stderr (logs, errors) goes to the view's
//! own `log (stderr)` area, apart from the events, instead of scribbling over the table; stderr is
//! given back before the final table.

use std::io::Write;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dispatch::{self, Note};
use crate::status::{Status, render};

/// Redraws at most this often (4 a second); ages and uptime tick once a second.
const FRAME: Duration = Duration::from_millis(250);
const TICK: Duration = Duration::from_secs(1);
/// Log lines under the live table, and under the final one.
const LOG_LIVE: usize = 12;
const LOG_FINAL: usize = 8;
/// How long the end waits for the last stderr lines when something else still holds the pipe.
const STDERR_GRACE: Duration = Duration::from_millis(500);

const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[H\x1b[2J";
const LEAVE: &str = "\x1b[?7h\x1b[?25h\x1b[?1049l";

enum Feed {
    Note(Box<Note>),
    Log(String),
    End,
}

/// The running view; [`View::finish`] ends it and restores the terminal.
pub struct View {
    tx: mpsc::Sender<Feed>,
    printer: Option<JoinHandle<()>>,
    stderr: Option<capture::Stderr>,
}

/// Whether `apiary up` should show the view: stdout is a terminal that understands ANSI.
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::env::var_os("TERM").is_none_or(|t| !t.is_empty() && t != "dumb")
}

/// Starts the view for these (pack, persona) pairs; the returned [`dispatch::Out`] feeds it.
pub fn start(personas: Vec<(String, String)>) -> (View, dispatch::Out) {
    let (tx, rx) = mpsc::channel::<Feed>();
    let mut status = Status::new(Instant::now());
    for (pack, persona) in &personas {
        status.seed(pack, persona);
    }
    let printer = std::thread::spawn(move || run(status, rx));
    let stderr = capture::Stderr::start(tx.clone());
    let sender = tx.clone();
    let out: dispatch::Out = std::sync::Arc::new(move |note: Note| {
        let _ = sender.send(Feed::Note(Box::new(note)));
    });
    let view = View {
        tx,
        printer: Some(printer),
        stderr,
    };
    (view, out)
}

impl View {
    /// Gives stderr back, lets the last lines in, draws the final table on the normal screen.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(stderr) = self.stderr.take() {
            stderr.restore(STDERR_GRACE);
        }
        let _ = self.tx.send(Feed::End);
        if let Some(p) = self.printer.take() {
            let _ = p.join();
        }
    }
}

impl Drop for View {
    /// A panic on the way: never leave the terminal in the alternate screen without a cursor.
    fn drop(&mut self) {
        if self.printer.is_some() {
            self.stop();
        }
    }
}

/// The printer thread: apply feeds, redraw when something changed (or a second passed).
fn run(mut status: Status, rx: mpsc::Receiver<Feed>) {
    let mut screen = Screen::enter();
    let mut drawn: Option<Instant> = None;
    let mut dirty = true;
    loop {
        let now = Instant::now();
        let due = match drawn {
            None => now,
            Some(t) if dirty => t + FRAME,
            Some(t) => t + TICK,
        };
        if now >= due {
            screen.draw(&status, now);
            drawn = Some(now);
            dirty = false;
            continue;
        }
        match rx.recv_timeout(due - now) {
            Ok(Feed::Note(note)) => {
                status.apply(&note, Instant::now());
                dirty = true;
            }
            Ok(Feed::Log(line)) => {
                status.stderr_line(&line);
                dirty = true;
            }
            Ok(Feed::End) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    // Whatever arrived with the end.
    while let Ok(feed) = rx.try_recv() {
        match feed {
            Feed::Note(note) => status.apply(&note, Instant::now()),
            Feed::Log(line) => status.stderr_line(&line),
            Feed::End => {}
        }
    }
    drop(screen);
    let (width, _) = size();
    let lines = render(&status, Instant::now(), width, usize::MAX, LOG_FINAL);
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// The terminal while the view owns it; dropping it restores the terminal.
struct Screen {
    size: (usize, usize),
}

impl Screen {
    fn enter() -> Screen {
        emit(ENTER);
        Screen { size: size() }
    }

    fn draw(&mut self, status: &Status, now: Instant) {
        let size = size();
        let mut frame = String::from("\x1b[H");
        if size != self.size {
            frame.push_str("\x1b[2J");
            self.size = size;
        }
        let lines = render(status, now, size.0, size.1, LOG_LIVE);
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                frame.push_str("\r\n");
            }
            frame.push_str("\x1b[2K");
            frame.push_str(line);
        }
        frame.push_str("\x1b[J");
        emit(&frame);
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        emit(LEAVE);
    }
}

fn emit(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// Columns and rows of the terminal on stdout (80×24 when it does not say).
fn size() -> (usize, usize) {
    match terminal_size::terminal_size_of(std::io::stdout()) {
        Some((w, h)) if w.0 > 0 && h.0 > 0 => (w.0 as usize, h.0 as usize),
        _ => (80, 24),
    }
}

#[cfg(unix)]
mod capture {
    //! Stderr into a pipe read by a thread that feeds the view's log area.

    use std::io::{BufRead, BufReader};
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::Feed;

    pub struct Stderr {
        saved: OwnedFd,
        closed: mpsc::Receiver<()>,
    }

    impl Stderr {
        /// Only when stderr is a terminal: logs going to a file or a pipe stay there.
        pub fn start(tx: mpsc::Sender<Feed>) -> Option<Stderr> {
            use std::io::IsTerminal;
            if !std::io::stderr().is_terminal() {
                return None;
            }
            let saved = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
            let (reader, writer) = std::io::pipe().ok()?;
            // SAFETY: dup2 on two descriptors this process owns; fd 2 now names the pipe.
            if unsafe { libc::dup2(writer.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
                return None;
            }
            drop(writer);
            let (done, closed) = mpsc::channel();
            std::thread::spawn(move || {
                let mut lines = BufReader::new(reader);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match lines.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let line = String::from_utf8_lossy(&buf);
                            let _ = tx.send(Feed::Log(line.trim_end().to_string()));
                        }
                    }
                }
                let _ = done.send(());
            });
            Some(Stderr { saved, closed })
        }

        /// Points fd 2 back at the terminal and waits (bounded) for the reader to see the end.
        pub fn restore(self, grace: Duration) {
            // SAFETY: as above; `saved` is the terminal's descriptor duplicated at start.
            unsafe { libc::dup2(self.saved.as_raw_fd(), libc::STDERR_FILENO) };
            let _ = self.closed.recv_timeout(grace);
        }
    }
}

#[cfg(not(unix))]
mod capture {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::Feed;

    /// Stderr stays as it is here.
    pub struct Stderr;

    impl Stderr {
        pub fn start(_tx: mpsc::Sender<Feed>) -> Option<Stderr> {
            None
        }

        pub fn restore(self, _grace: Duration) {}
    }
}
