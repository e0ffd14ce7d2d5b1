//! The last lines an agent wrote to its stderr, kept to explain its failures (a refused persona, a
//! failed turn). Agent output is hostile: lines are capped, control and bidirectional formatting
//! characters are replaced before anything shows them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Lines kept (the newest).
pub const TAIL_LINES: usize = 12;
/// Characters kept of one line.
pub const LINE_CHARS: usize = 300;

#[derive(Debug, Default)]
struct Inner {
    lines: VecDeque<String>,
    /// The stderr reader of the newest process reached the end of its pipe.
    closed: bool,
}

/// Shared between the stderr reader task and whoever reports a failure; one per persona, so the
/// lines of a crashed run are still there when its restart fails.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<Inner>>,
    closed: Arc<tokio::sync::Notify>,
}

impl StderrTail {
    /// A new process writes here from now on.
    pub(super) fn opened(&self) {
        lock(&self.inner).closed = false;
    }

    pub(super) fn push(&self, raw: &[u8]) {
        let line = visible(String::from_utf8_lossy(raw).trim_end(), LINE_CHARS);
        if line.trim().is_empty() {
            return;
        }
        let mut inner = lock(&self.inner);
        inner.lines.push_back(line);
        while inner.lines.len() > TAIL_LINES {
            inner.lines.pop_front();
        }
    }

    pub(super) fn close(&self) {
        lock(&self.inner).closed = true;
        self.closed.notify_waiters();
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.inner).lines.iter().cloned().collect()
    }

    /// The kept lines once the stderr pipe closed (the agent exited), waiting at most `grace`
    /// for that: a stopped agent's last words may still be in the pipe.
    pub async fn lines_after_exit(&self, grace: Duration) -> Vec<String> {
        let notified = self.closed.notified();
        if !lock(&self.inner).closed {
            let _ = tokio::time::timeout(grace, notified).await;
        }
        self.lines()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `text` made safe to print on one line: control characters (escape sequences' ESC included),
/// line breaks and bidirectional or invisible formatting become U+FFFD, and more than `max`
/// characters are cut with an ellipsis.
pub fn visible(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        out.push(match c {
            '\t' => ' ',
            c if hidden(c) => '\u{FFFD}',
            c => c,
        });
    }
    out
}

/// Characters that move the cursor, change colours, reorder or hide text on a terminal.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_lines_are_neutralised_and_bounded() {
        let tail = StderrTail::default();
        tail.push(b"\x1b[2J\x1b]0;owned\x07 fine\r\nreply bee");
        tail.push("a\u{202e}b".as_bytes());
        tail.push(&[b'x'; 5000]);
        tail.push(b"   ");
        let lines = tail.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines.iter().all(|l| !l.chars().any(char::is_control)));
        assert!(!lines[1].contains('\u{202e}'));
        assert_eq!(lines[2].chars().count(), LINE_CHARS + 1);
        for i in 0..100 {
            tail.push(format!("line {i}").as_bytes());
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.last().unwrap(), "line 99");
    }
}
