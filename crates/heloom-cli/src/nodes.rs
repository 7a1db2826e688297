//! `heloom serve nodes`: the local bridge of `heloom serve --local-nodes N`.
//!
//! The front (`heloom serve --local-nodes N`) starts this as a child process, as it starts the
//! Ray bridge (`python -m heloom.ray_nodes`) under `--ray`, and speaks the same protocol: one
//! JSON object per line on stdout (`join`, `leave`, `ready`, `error`; see
//! `python/heloom/ray_nodes.py`). Here the nodes are `heloom serve` processes on this machine,
//! each on its own data directory with its own threads, optionally pinned to their own cores
//! (`taskset`): a NUMA machine split into one node server per socket, or a many-core machine
//! measured as N small ones without a Ray installation. Placement, key caching and the data path
//! are the front's, the same as on Ray.
//!
//! The bridge exits, stopping its node servers and removing their directories, when its stdin
//! closes (the front stopped or died). A node server that exits is reported as `leave` (its
//! jobs go to the other nodes) and started again on a fresh directory, reported as `join`
//! under the same id: after a pause of 1 s that doubles with each exit in a row, up to 30 s
//! (one that ran for a minute starts the count again).

use anyhow::{bail, Context as _, Result};
use clap::Args;
use heloom_bench::spawn::{spawn_listening, LISTENING_ON};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest pause before a node server that keeps exiting is started again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A node server that ran this long before it exited restarts after the shortest pause.
const STABLE: Duration = Duration::from_secs(60);

/// Tenant name of the front on every node server (as on Ray).
const NODE_TENANT: &str = "front";

/// Arguments of `heloom serve nodes`.
#[derive(Args, Debug)]
pub struct NodesArgs {
    /// Node servers to start.
    #[arg(long)]
    nodes: usize,
    /// Threads of each node server.
    #[arg(long)]
    threads: usize,
    /// Pin node i to cores i*threads .. (i+1)*threads-1 (needs `taskset`).
    #[arg(long)]
    pin: bool,
    /// Accept CKKS parameters below 128-bit security on the node servers.
    #[arg(long)]
    allow_insecure: bool,
}

/// One node server.
struct Node {
    id: String,
    index: usize,
    child: Child,
    dir: PathBuf,
    /// Its server exited (reported as `leave`); it starts again at `retry_at`.
    left: bool,
    started: Instant,
    /// Exits in a row (each doubles the pause before the next start).
    failures: u32,
    retry_at: Option<Instant>,
}

/// Writes one protocol line on stdout (a front that is gone is noticed by stdin closing).
fn emit(v: serde_json::Value) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}").and_then(|()| out.flush());
}

/// Runs the bridge until stdin closes.
pub fn run(a: &NodesArgs) -> Result<()> {
    match start(a) {
        Ok(nodes) => supervise(a, nodes),
        Err(e) => {
            emit(serde_json::json!({"event": "error", "message": format!("{e:#}")}));
            Err(e)
        }
    }
}

fn start(a: &NodesArgs) -> Result<Vec<Node>> {
    if a.nodes == 0 || a.threads == 0 {
        bail!("--nodes and --threads must be at least 1");
    }
    let cores = machine_cores();
    if a.pin && a.nodes * a.threads > cores {
        bail!(
            "--pin: {} nodes x {} threads need {} cores, this machine has {cores}",
            a.nodes,
            a.threads,
            a.nodes * a.threads
        );
    }
    if a.pin && Command::new("taskset").arg("--version").output().is_err() {
        bail!("--pin needs `taskset` (util-linux); install it or run without pinning");
    }
    let exe = std::env::current_exe().context("finding the heloom binary")?;
    let mut nodes: Vec<Node> = Vec::with_capacity(a.nodes);
    for i in 0..a.nodes {
        let started = start_node(&exe, a, i);
        match started {
            Ok((node, url, token)) => {
                announce(a, &node, &url, &token);
                nodes.push(node);
            }
            Err(e) => {
                for n in &mut nodes {
                    stop(n);
                }
                return Err(e.context(format!("starting node server {i}")));
            }
        }
    }
    emit(serde_json::json!({"event": "ready", "nodes": nodes.len()}));
    Ok(nodes)
}

/// The machine's online cores. Not `available_parallelism`: that is this process's affinity
/// mask, and a front pinned off the nodes' cores starts nodes pinned to cores outside it.
fn machine_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| count_cpu_list(s.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Counts the CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Reports a started node server to the front (`join`).
fn announce(a: &NodesArgs, node: &Node, url: &str, token: &str) {
    emit(serde_json::json!({
        "event": "join",
        "node_id": node.id,
        "url": url,
        "token": token,
        "threads": a.threads,
        "ip": "127.0.0.1",
        "pid": node.child.id(),
    }));
}

fn start_node(exe: &Path, a: &NodesArgs, i: usize) -> Result<(Node, String, String)> {
    let dir = std::env::temp_dir().join(format!("heloom-node-{}-{i}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(exe)
        .args(["serve", "token", "create", "--data"])
        .arg(&dir)
        .args(["--tenant", NODE_TENANT])
        .output()
        .context("creating the node server's token")?;
    if !out.status.success() {
        bail!(
            "heloom serve token create failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut cmd = if a.pin {
        let first = i * a.threads;
        let mut c = Command::new("taskset");
        c.args(["-c", &format!("{first}-{}", first + a.threads - 1)])
            .arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(&dir)
        .args(["--threads", &a.threads.to_string()])
        // The front keeps the records and results; a node's store is scratch.
        .arg("--scratch")
        // Nodes of one machine would all pull jobs onto its one GPU: they emulate machines
        // of CPUs (a Ray cluster's nodes use their own GPUs).
        .args(["--gpu", "off"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if a.allow_insecure {
        cmd.arg("--allow-insecure");
    }
    let id = format!("local-{i}");
    let tag = id.clone();
    // Node servers' logs go to this bridge's stderr, which the front forwards; reworded so
    // that a node's "listening on" line is never taken for the front's own.
    let l = spawn_listening(&mut cmd, move |line| {
        eprintln!("{tag}: {}", line.replace(LISTENING_ON, "node server at "))
    })?;
    Ok((
        Node {
            id,
            index: i,
            child: l.child,
            dir,
            left: false,
            started: Instant::now(),
            failures: 0,
            retry_at: None,
        },
        l.url,
        token,
    ))
}

fn stop(n: &mut Node) {
    let _ = n.child.kill();
    let _ = n.child.wait();
    let _ = std::fs::remove_dir_all(&n.dir);
}

/// The pause before the next start after `failures` exits in a row.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(5)).min(MAX_BACKOFF)
}

/// Reports node servers that exit and starts them again, until stdin closes; then stops them
/// all.
fn supervise(a: &NodesArgs, mut nodes: Vec<Node>) -> Result<()> {
    let exe = std::env::current_exe().context("finding the heloom binary")?;
    let closed = Arc::new(AtomicBool::new(false));
    let c = Arc::clone(&closed);
    std::thread::spawn(move || {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        c.store(true, Ordering::SeqCst);
    });
    while !closed.load(Ordering::SeqCst) {
        for n in nodes.iter_mut() {
            if !n.left {
                if let Ok(Some(status)) = n.child.try_wait() {
                    n.left = true;
                    n.failures = if n.started.elapsed() >= STABLE {
                        1
                    } else {
                        n.failures + 1
                    };
                    let pause = backoff(n.failures);
                    n.retry_at = Some(Instant::now() + pause);
                    emit(serde_json::json!({
                        "event": "leave",
                        "node_id": n.id,
                        "reason": format!(
                            "its server exited ({status}); starting it again in {} s",
                            pause.as_secs()
                        ),
                    }));
                }
                continue;
            }
            if n.retry_at.is_some_and(|t| Instant::now() >= t) {
                match start_node(&exe, a, n.index) {
                    Ok((mut node, url, token)) => {
                        node.failures = n.failures;
                        announce(a, &node, &url, &token);
                        *n = node;
                    }
                    Err(e) => {
                        n.failures += 1;
                        let pause = backoff(n.failures);
                        n.retry_at = Some(Instant::now() + pause);
                        eprintln!(
                            "{}: starting it again failed: {e:#}; next try in {} s",
                            n.id,
                            pause.as_secs()
                        );
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for n in &mut nodes {
        stop(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_thirty_seconds() {
        let secs: Vec<u64> = (1..=8).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-15"), Some(16));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("5"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }
}
