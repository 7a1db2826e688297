//! Starting a `heloom serve` process and learning where it listens.
//!
//! The server prints `heloom serve: listening on <url> ...` on stderr once its socket is bound
//! (so `--listen 127.0.0.1:0` lets the OS pick a free port and the line says which).
//! [`spawn_listening`] starts such a command, reads its stderr up to that line and keeps
//! draining the rest on a thread, so that the server never blocks on a full pipe; every line
//! goes to a callback for a caller that keeps a log. The demo, the load test (and the serving
//! overhead benchmark through it) and the CLI's tests start their servers with it.

use anyhow::{bail, Context as _, Result};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// What precedes the address in the line the server prints once it listens.
pub const LISTENING_ON: &str = "listening on ";

/// Lines of stderr quoted in the error for a process that exits before listening.
const TAIL_LINES: usize = 40;

/// A started server process and the address it printed.
#[derive(Debug)]
pub struct Listening {
    /// The process; the caller kills and waits for it.
    pub child: Child,
    /// The address as printed, e.g. `http://127.0.0.1:40123`.
    pub url: String,
}

impl Listening {
    /// The port [`Listening::url`] ends in, if it ends in one.
    pub fn port(&self) -> Option<u16> {
        self.url.rsplit(':').next().and_then(|p| p.parse().ok())
    }
}

/// The address in a server's log line `... listening on <url> ...`, if it is that line.
pub fn listening_address(line: &str) -> Option<&str> {
    line.split(LISTENING_ON).nth(1)?.split_whitespace().next()
}

/// Spawns `cmd` with stderr piped (stdin and stdout stay as the caller set them), reads its
/// stderr until a line names the address (`listening on <url>`), and returns the process and
/// that address. Every stderr line, before the address and after it, goes to `on_line` (not
/// UTF-8: lossily); after the address a thread keeps reading until the process closes stderr.
/// A process that closes stderr without naming an address (it exited, e.g. could not bind) is
/// killed and waited for, and the error names the command and quotes its last stderr lines.
/// There is no time limit: a process that neither prints the line nor exits blocks the call.
pub fn spawn_listening(
    cmd: &mut Command,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> Result<Listening> {
    let what = describe(cmd);
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let Some(stderr) = child.stderr.take() else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("no stderr from the server process ({what})");
    };
    let mut reader = BufReader::new(stderr);
    let mut tail = VecDeque::new();
    let mut url = None;
    while let Some(line) = next_line(&mut reader) {
        on_line(&line);
        if let Some(u) = listening_address(&line) {
            url = Some(u.to_string());
            break;
        }
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let Some(url) = url else {
        let _ = child.kill();
        let _ = child.wait();
        let said = if tail.is_empty() {
            String::from(" (it printed nothing)")
        } else {
            format!(":\n{}", Vec::from(tail).join("\n"))
        };
        bail!("{what} exited before listening{said}");
    };
    std::thread::spawn(move || {
        while let Some(line) = next_line(&mut reader) {
            on_line(&line);
        }
    });
    Ok(Listening { child, url })
}

/// The next line of `r` without its line end; `None` at the end or on a read error.
fn next_line(r: &mut impl BufRead) -> Option<String> {
    let mut buf = Vec::new();
    match r.read_until(b'\n', &mut buf) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            while buf.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
                buf.pop();
            }
            Some(String::from_utf8_lossy(&buf).into_owned())
        }
    }
}

/// `program subcommand` of `cmd`, for messages (e.g. `/path/to/heloom serve`).
fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    if let Some(first) = cmd.get_args().next() {
        s.push(' ');
        s.push_str(&first.to_string_lossy());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_address_is_read_from_the_line() {
        let line = "heloom serve: listening on http://127.0.0.1:4321 (HTTP/1.1 and HTTP/2), data d";
        assert_eq!(listening_address(line), Some("http://127.0.0.1:4321"));
        assert_eq!(listening_address("heloom serve: starting"), None);
    }

    /// `sh` stands in for the server: it prints a line, the address, and more log.
    #[cfg(unix)]
    #[test]
    fn a_process_that_listens_is_returned_with_its_address_and_log() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo opening >&2; echo 'x: listening on http://127.0.0.1:4321 (h2)' >&2; echo later >&2",
        ]);
        let mut l = spawn_listening(&mut cmd, move |line| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.to_string());
        })
        .expect("spawned");
        assert_eq!(l.url, "http://127.0.0.1:4321");
        assert_eq!(l.port(), Some(4321));
        l.child.wait().expect("exits");
        // The drain thread hands over the last line soon after the process exits.
        for _ in 0..500 {
            if log.lock().unwrap_or_else(|p| p.into_inner()).len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let got = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(got[0], "opening");
        assert_eq!(got[2], "later");
    }

    #[cfg(unix)]
    #[test]
    fn a_process_that_exits_first_is_an_error_naming_it_with_its_log() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo 'cannot bind' >&2; exit 3"]);
        let e = spawn_listening(&mut cmd, |_| {}).expect_err("never listened");
        let msg = format!("{e:#}");
        assert!(msg.starts_with("sh -c exited before listening"), "{msg}");
        assert!(msg.contains("cannot bind"), "{msg}");
        let e = spawn_listening(&mut Command::new("/nonexistent/heloom"), |_| {})
            .expect_err("no such program");
        assert!(
            format!("{e:#}").contains("starting /nonexistent/heloom"),
            "{e:#}"
        );
    }
}
