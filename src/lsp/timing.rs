//! The time each part of a check or a request takes, written to standard error (one line
//! each) when `$VAPCHECK_LSP_TIMINGS` is set and not empty: for finding where an edit's time
//! goes (docs/editor.md, "Numbers"). Off, it costs one check of a flag.

use std::fmt::Write as _;
use std::time::Instant;

/// Whether the timings are written (read once).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("VAPCHECK_LSP_TIMINGS").is_some_and(|v| !v.is_empty()))
}

/// The parts of one check or request, timed from one mark to the next.
pub struct Timings {
    what: &'static str,
    last: Option<Instant>,
    parts: Vec<(&'static str, f64)>,
}

impl Timings {
    /// Starts timing `what` (nothing when the timings are off).
    pub fn start(what: &'static str) -> Self {
        Timings {
            what,
            last: enabled().then(Instant::now),
            parts: Vec::new(),
        }
    }

    /// Ends the part `name` (begun at the last mark).
    pub fn mark(&mut self, name: &'static str) {
        if let Some(last) = self.last {
            let now = Instant::now();
            self.parts
                .push((name, now.duration_since(last).as_secs_f64() * 1000.0));
            self.last = Some(now);
        }
    }
}

impl Drop for Timings {
    fn drop(&mut self) {
        if self.last.is_none() {
            return;
        }
        let total: f64 = self.parts.iter().map(|(_, ms)| ms).sum();
        let mut line = format!("vapcheck lsp: {} {total:.2} ms:", self.what);
        for (name, ms) in &self.parts {
            let _ = write!(line, " {name} {ms:.2}");
        }
        eprintln!("{line}");
    }
}
