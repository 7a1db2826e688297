//! The peers of `heloom bench bootstrap --vs lattigo,openfhe` (issue 19): Lattigo v6 through a
//! small Go program (`bench/peers/lattigo_bootstrap/`, embedded, built with the Go toolchain
//! from the Go module proxy into a cache directory) and OpenFHE through its PyPI wheel
//! (`bench/peers/openfhe_bootstrap.py`, embedded, run by a Python 3.10 interpreter), each in a
//! subprocess at its own default bootstrapping parameters, with the benchmark's thread
//! budgets. Both print one JSON object ([`PeerReport`]) on stdout and `progress: ...` lines on
//! stderr; a peer that fails (out of memory, parameters refused, not installed) comes back as
//! a report with [`PeerReport::error`] set rather than as an error of the benchmark.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The Go program's sources, embedded so that the binary builds it from any directory.
const LATTIGO_MAIN: &str = include_str!("../../../bench/peers/lattigo_bootstrap/main.go");
/// Its module file (Lattigo pinned to v6.1.1).
const LATTIGO_GO_MOD: &str = include_str!("../../../bench/peers/lattigo_bootstrap/go.mod");
/// Its checksums.
const LATTIGO_GO_SUM: &str = include_str!("../../../bench/peers/lattigo_bootstrap/go.sum");
/// The OpenFHE script.
const OPENFHE_SCRIPT: &str = include_str!("../../../bench/peers/openfhe_bootstrap.py");

/// Lines of a peer's stderr quoted when it fails without a JSON record.
const TAIL_LINES: usize = 20;

/// A library run beside heloom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// Lattigo v6 (Go).
    Lattigo,
    /// OpenFHE (C++, through its Python wheel).
    Openfhe,
}

impl Peer {
    /// The name in the JSON records (`lattigo`, `openfhe`).
    pub fn id(self) -> &'static str {
        match self {
            Peer::Lattigo => "lattigo",
            Peer::Openfhe => "openfhe",
        }
    }

    /// The name as the library spells it.
    pub fn display(self) -> &'static str {
        match self {
            Peer::Lattigo => "Lattigo",
            Peer::Openfhe => "OpenFHE",
        }
    }
}

/// One thread budget's bootstrap by a peer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PeerRow {
    /// Thread budget asked for (GOMAXPROCS for Lattigo, OpenMP threads for OpenFHE).
    pub threads: usize,
    /// The bootstrap, s (the fastest of the repetitions).
    pub total_s: f64,
    /// -log2 of the largest error over the slots.
    pub worst_bits: f64,
    /// -log2 of the mean error.
    pub mean_bits: f64,
    /// Levels left after bootstrapping, as the peer counts them.
    pub levels_left: i64,
    /// This time over heloom's at the same thread budget (filled in by the benchmark).
    #[serde(default)]
    pub time_over_heloom: Option<f64>,
    /// Whatever else the peer reported (e.g. `gomaxprocs`, `omp_threads`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What a peer program prints (or, on failure, what is known and the error).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerReport {
    /// `lattigo` or `openfhe`.
    pub peer: String,
    /// The library's version.
    pub version: Option<String>,
    /// The parameter set (Lattigo's name, or OpenFHE's setup in words).
    pub params: Option<String>,
    /// log2 N.
    pub log_n: Option<u32>,
    /// log2 of Q P of the bootstrapping parameters (Lattigo).
    pub log_qp: Option<f64>,
    /// log2 of Q, nominal (OpenFHE, which does not expose P).
    pub log_q: Option<f64>,
    /// The secret's Hamming weight (`None`: uniform ternary).
    pub hamming_weight: Option<u64>,
    /// The ephemeral sparse secret's Hamming weight (encapsulation), if used.
    pub ephemeral_hamming_weight: Option<u64>,
    /// Slots.
    pub slots: Option<u64>,
    /// Security level claimed (bits; 0 for none).
    pub security_bits: Option<u32>,
    /// An insecure smoke run.
    pub insecure: bool,
    /// Key generation, s.
    pub keygen_s: Option<f64>,
    /// Encoding the transforms, s.
    pub setup_s: Option<f64>,
    /// Serialized evaluation keys, bytes.
    pub key_bytes: Option<u64>,
    /// Rotation keys.
    pub rotations: Option<u64>,
    /// One row per thread budget.
    #[serde(deserialize_with = "null_as_default")]
    pub rows: Vec<PeerRow>,
    /// Peak resident memory of the peer's process (VmHWM), bytes.
    pub peak_rss_bytes: Option<u64>,
    /// How the parameters were completed or adapted.
    #[serde(deserialize_with = "null_as_default")]
    pub notes: Vec<String>,
    /// Why the peer did not finish (out of memory, parameters refused, not installed).
    pub error: Option<String>,
    /// The ring dimension OpenFHE picks by itself when it refused the one asked for.
    pub default_ring_dim: Option<u64>,
    /// The command run (filled in by the benchmark).
    pub command: String,
    /// Wall time of the whole subprocess, s (filled in by the benchmark).
    pub wall_s: f64,
    /// Whatever else the peer reported.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl PeerReport {
    /// A report that is only an error.
    pub fn failed(peer: Peer, error: String) -> Self {
        Self {
            peer: peer.id().to_string(),
            error: Some(error),
            ..Self::default()
        }
    }

    /// Whether the peer finished (no error, at least one row).
    pub fn ok(&self) -> bool {
        self.error.is_none() && !self.rows.is_empty()
    }

    /// The row for `threads`, if the peer finished one.
    pub fn row(&self, threads: usize) -> Option<&PeerRow> {
        if self.error.is_some() {
            return None;
        }
        self.rows.iter().find(|r| r.threads == threads)
    }
}

/// `null` read as the type's default (Go prints a nil slice as `null`).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Reads a peer's stdout: the last line that is a JSON object.
pub fn parse_peer_json(peer: Peer, stdout: &str) -> Result<PeerReport, String> {
    let line = stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| "it printed no JSON record".to_string())?;
    let mut r: PeerReport =
        serde_json::from_str(line).map_err(|e| format!("its JSON record is unreadable: {e}"))?;
    if r.peer.is_empty() {
        r.peer = peer.id().to_string();
    }
    Ok(r)
}

/// Lattigo's default set for a ring degree: the dense-secret sets, as heloom's presets. At
/// N = 2^16 the one that leaves what heloom's preset leaves, 9 levels of 2^45 (the issue's
/// reference figure, 9 levels left, is this set's); N16QP1767H32768H32 leaves 13 of 2^40.
pub fn lattigo_params(log_n: u32) -> &'static str {
    if log_n >= 16 {
        "N16QP1788H32768H32"
    } else {
        "N15QP880H16384H32"
    }
}

/// heloom's cache directory: `$XDG_CACHE_HOME/heloom`, `~/.cache/heloom`, or the temporary
/// directory's `heloom-cache`.
fn cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(x).join("heloom");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(h).join(".cache").join("heloom");
    }
    std::env::temp_dir().join("heloom-cache")
}

/// FNV-1a, to name a build directory after its sources (a changed source builds afresh).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The Go toolchain: `explicit`, else `go` on PATH, else /usr/local/go/bin/go.
pub fn find_go(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let go = dir.join("go");
            if go.is_file() {
                return Ok(go);
            }
        }
    }
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    if fallback.is_file() {
        return Ok(fallback);
    }
    Err(
        "Go is not installed (`go` is not on PATH and /usr/local/go/bin/go does not exist): \
         install Go 1.22 or later (https://go.dev/dl/), which builds the Lattigo program from \
         the Go module proxy, or pass --go PATH"
            .to_string(),
    )
}

/// Writes the embedded Go program into the cache and builds it with `go` (once per version of
/// the sources); returns the binary.
pub fn build_lattigo(go: &Path, note: &dyn Fn(&str)) -> Result<PathBuf, String> {
    let dir = cache_dir().join("peers").join(format!(
        "lattigo_bootstrap-{:016x}",
        fnv1a(&[LATTIGO_MAIN, LATTIGO_GO_MOD, LATTIGO_GO_SUM])
    ));
    let bin = dir.join("lattigo_bootstrap");
    if bin.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for (name, text) in [
        ("main.go", LATTIGO_MAIN),
        ("go.mod", LATTIGO_GO_MOD),
        ("go.sum", LATTIGO_GO_SUM),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    note(&format!(
        "lattigo: building the Go program in {} (fetches Lattigo v6.1.1 from the Go module proxy the first time)",
        dir.display()
    ));
    // Built under a temporary name and renamed, so that a failed build leaves no binary.
    let out = Command::new(go)
        .args(["build", "-o", "lattigo_bootstrap.part", "."])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "could not run {}: {e}. Install Go 1.22 or later (https://go.dev/dl/) or pass --go PATH",
                go.display()
            )
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "building the Lattigo program with {} failed ({}) in {}:\n{}\nIt needs Go 1.22 or \
             later and the Go module proxy (or a module cache holding \
             github.com/tuneinsight/lattigo/v6 v6.1.1).",
            go.display(),
            out.status,
            dir.display(),
            tail(err.lines().map(str::to_string))
        ));
    }
    std::fs::rename(dir.join("lattigo_bootstrap.part"), &bin)
        .map_err(|e| format!("renaming the built program in {}: {e}", dir.display()))?;
    Ok(bin)
}

/// Builds (if needed) and runs the Lattigo program at `params` on each of `threads`.
pub fn run_lattigo(
    go: Option<&Path>,
    params: &str,
    threads: &[usize],
    reps: usize,
    note: &dyn Fn(&str),
) -> PeerReport {
    let built = find_go(go).and_then(|go| build_lattigo(&go, note));
    let bin = match built {
        Ok(b) => b,
        Err(e) => return PeerReport::failed(Peer::Lattigo, e),
    };
    let mut cmd = Command::new(bin);
    cmd.args(["-params", params, "-threads", &join(threads), "-reps"])
        .arg(reps.max(1).to_string());
    // Go's collector lets the heap grow to twice what is live; at N = 2^16 that passed the
    // 24 GB of a 2-vCPU VM (killed at 21.8 GB resident). A soft limit of 85% of the memory
    // makes it collect harder near the top instead (GOMEMLIMIT; one set by the caller wins).
    let limit = std::env::var_os("GOMEMLIMIT")
        .is_none()
        .then(|| heloom_pool::total_memory_bytes().map(|total| total / 100 * 85));
    if let Some(Some(bytes)) = limit {
        cmd.env("GOMEMLIMIT", bytes.to_string());
    }
    let mut r = run_process(Peer::Lattigo, cmd, note);
    if let Some(Some(bytes)) = limit {
        r.notes.push(format!(
            "GOMEMLIMIT={bytes} (85% of this machine's memory), so that Go's collector keeps the heap within it"
        ));
    }
    r
}

/// The default OpenFHE interpreter: `.venv-openfhe/bin/python` when it exists, else
/// `python3.10`.
pub fn default_openfhe_python() -> PathBuf {
    let venv = PathBuf::from(".venv-openfhe/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3.10")
    }
}

/// How OpenFHE's ring dimension is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OpenfheRing {
    /// Ask for this ring dimension at 128-bit security (OpenFHE refuses one too small).
    Secure(usize),
    /// OpenFHE's own choice at 128-bit security.
    Auto,
    /// A smoke test: no security (HEStd_NotSet) at this ring dimension.
    Insecure(usize),
}

/// Writes the embedded OpenFHE script into the cache and runs it with `python`.
pub fn run_openfhe(
    python: &Path,
    ring: OpenfheRing,
    max_gb: f64,
    threads: &[usize],
    reps: usize,
    note: &dyn Fn(&str),
) -> PeerReport {
    let dir = cache_dir().join("peers");
    let script = dir.join(format!(
        "openfhe_bootstrap-{:016x}.py",
        fnv1a(&[OPENFHE_SCRIPT])
    ));
    if !script.is_file() {
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&script, OPENFHE_SCRIPT))
            .map_err(|e| format!("writing {}: {e}", script.display()));
        if let Err(e) = written {
            return PeerReport::failed(Peer::Openfhe, e);
        }
    }
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .args(["--threads", &join(threads), "--reps"])
        .arg(reps.max(1).to_string())
        .arg("--max-gb")
        .arg(max_gb.to_string());
    match ring {
        OpenfheRing::Secure(n) => cmd.arg("--ring-dim").arg(n.to_string()),
        OpenfheRing::Auto => cmd.arg("--ring-dim").arg("0"),
        OpenfheRing::Insecure(n) => cmd.arg("--insecure-ring-dim").arg(n.to_string()),
    };
    let mut r = run_process(Peer::Openfhe, cmd, note);
    if r.extra.get("exit_code").and_then(|c| c.as_i64()) == Some(3) {
        r.error = Some(format!(
            "OpenFHE is not available to {}: {}. Its PyPI wheels load on Python 3.10: \
             `~/.pyenv/versions/3.10.13/bin/python -m venv .venv-openfhe && \
             .venv-openfhe/bin/pip install openfhe numpy` (.venv-openfhe/bin/python is used by \
             default), or pass --python-openfhe PATH",
            python.display(),
            r.error.as_deref().unwrap_or("not importable")
        ));
    }
    r
}

fn join(threads: &[usize]) -> String {
    threads
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn tail(lines: impl Iterator<Item = String>) -> String {
    let mut t = VecDeque::new();
    for l in lines {
        if t.len() == TAIL_LINES {
            t.pop_front();
        }
        t.push_back(l);
    }
    Vec::from(t).join("\n")
}

/// Runs a peer program: `progress: ` lines on its stderr go to `note`, its stdout is the JSON
/// record. A failure without a record becomes an error naming the command and quoting its
/// stderr.
fn run_process(peer: Peer, mut cmd: Command, note: &dyn Fn(&str)) -> PeerReport {
    let command = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let mut r = PeerReport::failed(peer, format!("could not start {command}: {e}"));
            r.command = command;
            return r;
        }
    };
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = stdout {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let mut other = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            match line.strip_prefix("progress: ") {
                Some(msg) => note(msg),
                None => other.push(line),
            }
        }
    }
    let status = child.wait();
    let stdout = reader.join().unwrap_or_default();
    let err_tail = tail(other.into_iter());
    let mut r = match (status, parse_peer_json(peer, &stdout)) {
        (Ok(s), Ok(mut r)) => {
            if !s.success() && r.error.is_none() {
                r.error = Some(format!("exited with {s}: {err_tail}"));
            }
            if let Some(code) = s.code().filter(|&c| c != 0) {
                r.extra.insert("exit_code".into(), code.into());
            }
            r
        }
        (Ok(s), Err(e)) => {
            let mut r = PeerReport::failed(
                peer,
                if s.success() {
                    format!("{e}; its stderr:\n{err_tail}")
                } else {
                    format!("it failed ({s}): {}", err_tail.trim())
                },
            );
            if let Some(code) = s.code() {
                r.extra.insert("exit_code".into(), code.into());
            }
            r
        }
        (Err(e), _) => PeerReport::failed(peer, format!("waiting for it: {e}")),
    };
    r.command = command;
    r.wall_s = started.elapsed().as_secs_f64();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record shaped as the Go program prints it (made-up numbers).
    const LATTIGO: &str = r#"{"peer":"lattigo","version":"v6.1.1","runtime":"go1.26.8","params":"N15QP880H16384H32","log_n":15,"log_qp":880.2,"residual_log_qp":276.1,"hamming_weight":16384,"ephemeral_hamming_weight":32,"slots":16384,"scale_bits":31,"depth":11,"security_bits":128,"keygen_s":9.5,"setup_s":4.25,"key_bytes":5400000000,"rotations":60,"cores":2,"rows":[{"threads":1,"gomaxprocs":1,"total_s":12.5,"worst_bits":16.9,"mean_bits":19.2,"levels_left":4},{"threads":2,"gomaxprocs":2,"total_s":11.0,"worst_bits":16.9,"mean_bits":19.2,"levels_left":4}],"peak_rss_bytes":9800000000,"notes":null}"#;

    #[test]
    fn the_go_programs_record_is_read() {
        let r = parse_peer_json(Peer::Lattigo, &format!("\n{LATTIGO}\n")).expect("parsed");
        assert!(r.ok());
        assert_eq!(r.version.as_deref(), Some("v6.1.1"));
        assert_eq!(r.log_n, Some(15));
        assert_eq!(r.hamming_weight, Some(16384));
        assert_eq!(r.ephemeral_hamming_weight, Some(32));
        assert_eq!(r.key_bytes, Some(5_400_000_000));
        assert!(r.notes.is_empty());
        assert_eq!(r.rows.len(), 2);
        let two = r.row(2).expect("a row on two threads");
        assert_eq!(two.total_s, 11.0);
        assert_eq!(two.levels_left, 4);
        assert_eq!(two.extra.get("gomaxprocs"), Some(&serde_json::json!(2)));
        assert!(r.row(16).is_none());
        // Fields the struct does not name survive into the benchmark's JSON.
        assert_eq!(r.extra.get("runtime"), Some(&serde_json::json!("go1.26.8")));
        let back = serde_json::to_value(&r).expect("serialized");
        assert_eq!(back["scale_bits"], 31);
        assert_eq!(back["rows"][0]["gomaxprocs"], 1);
    }

    #[test]
    fn an_error_record_is_a_failed_peer() {
        let out = "progress: x\n{\"peer\": \"openfhe\", \"version\": \"1.6.1.0\", \"hamming_weight\": null, \
                   \"error\": \"OpenFHE refused the parameters: The specified ring dimension (32768) does not comply with HE standards recommendation (131072).\", \
                   \"default_ring_dim\": 131072, \"peak_rss_bytes\": 234262528}";
        let r = parse_peer_json(Peer::Openfhe, out).expect("parsed");
        assert!(!r.ok());
        assert!(r.row(1).is_none());
        assert_eq!(r.default_ring_dim, Some(131_072));
        assert!(r.error.as_deref().is_some_and(|e| e.contains("refused")));
        assert_eq!(r.hamming_weight, None);
        assert!(parse_peer_json(Peer::Openfhe, "no json here").is_err());
        assert!(parse_peer_json(Peer::Openfhe, "{not json").is_err());
        // A record without a peer name gets the one asked for.
        let r = parse_peer_json(Peer::Lattigo, r#"{"error": "x"}"#).expect("parsed");
        assert_eq!(r.peer, "lattigo");
    }

    #[test]
    fn the_lattigo_set_matches_the_ring_degree() {
        assert_eq!(lattigo_params(16), "N16QP1788H32768H32");
        assert_eq!(lattigo_params(15), "N15QP880H16384H32");
        assert_ne!(fnv1a(&["a", "b"]), fnv1a(&["ab"]));
    }

    /// A missing program is a failed peer with the command in the message, not a panic.
    #[test]
    fn a_program_that_cannot_start_is_a_failed_peer() {
        let r = run_process(
            Peer::Openfhe,
            Command::new("/nonexistent/python3.10"),
            &|_| {},
        );
        assert!(!r.ok());
        assert!(
            r.error
                .as_deref()
                .is_some_and(|e| e.contains("could not start /nonexistent/python3.10")),
            "{:?}",
            r.error
        );
    }

    /// `sh` stands in for a peer: progress lines reach the callback, the record is read, a
    /// non-zero exit with a record keeps the record's error.
    #[cfg(unix)]
    #[test]
    fn progress_and_the_record_are_separated() {
        let seen = std::sync::Mutex::new(Vec::new());
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo 'progress: generating keys' >&2; echo noise >&2; \
             echo '{\"error\": \"out of memory: killed\"}'; exit 2",
        ]);
        let r = run_process(Peer::Openfhe, cmd, &|m| {
            seen.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(m.to_string());
        });
        assert_eq!(
            *seen.lock().unwrap_or_else(|p| p.into_inner()),
            vec!["generating keys".to_string()]
        );
        assert_eq!(r.error.as_deref(), Some("out of memory: killed"));
        assert_eq!(r.extra.get("exit_code"), Some(&serde_json::json!(2)));
        assert!(r.command.starts_with("sh -c"));
    }

    /// Builds and runs the Lattigo program at N = 2^15 (a few minutes, 14 GB peak): only with
    /// HELOOM_PEER_TESTS=1.
    #[test]
    fn lattigo_runs_at_n15() {
        if std::env::var("HELOOM_PEER_TESTS").as_deref() != Ok("1") {
            eprintln!("skipped: set HELOOM_PEER_TESTS=1 to build and run the Lattigo program");
            return;
        }
        let r = run_lattigo(None, "N15QP880H16384H32", &[1], 1, &|m| eprintln!("{m}"));
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.log_n, Some(15));
        let row = r.row(1).expect("one row");
        assert!(row.total_s > 0.0);
        assert!(row.worst_bits > 10.0, "{}", row.worst_bits);
        assert!(row.levels_left >= 1);
        assert!(r.key_bytes.is_some_and(|b| b > 0));
    }
}
