//! Progress of long benchmarks on stderr: a bar on a terminal, plain lines otherwise (logs,
//! pipes, CI).

use indicatif::{ProgressBar, ProgressStyle};

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `len` steps (0: unknown length).
    pub fn new(len: u64) -> Self {
        use std::io::IsTerminal;
        let bar = if std::io::stderr().is_terminal() {
            let pb = ProgressBar::new(len);
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30} {pos}/{len} [{elapsed}] {msg}")
            {
                pb.set_style(style);
            }
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            pb
        } else {
            ProgressBar::hidden()
        };
        Self { bar }
    }

    /// Shows what is being done now.
    pub fn step(&self, msg: &str) {
        if self.bar.is_hidden() {
            eprintln!("  {msg}");
        } else {
            self.bar.set_message(msg.to_string());
        }
    }

    /// One step done.
    pub fn inc(&self) {
        self.bar.inc(1);
    }

    /// A line above the bar (or on its own without a terminal).
    pub fn println(&self, msg: &str) {
        if self.bar.is_hidden() {
            eprintln!("{msg}");
        } else {
            self.bar.println(msg);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
