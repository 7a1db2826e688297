//! What the CLI tests share: the binary under test, per-process output folders, and a run
//! that must succeed and print JSON.

// Each test file compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `heloom` binary built for these tests.
pub fn heloom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_heloom"))
}

/// A folder in the temporary directory named after `tag` and this process (so that
/// concurrent test runs do not share it).
pub fn out_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("heloom-{tag}-{}", std::process::id()))
}

/// Runs `cmd`, asserts that it succeeded (the message: `what` and its stderr) and parses its
/// stdout as JSON.
pub fn run_json(
    cmd: &mut Command,
    what: &str,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let out = cmd.output()?;
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Runs `heloom <args> --json --out <dir>` as [`run_json`] does.
pub fn run_json_out(
    args: &[&str],
    dir: &Path,
    what: &str,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    run_json(heloom().args(args).args(["--json", "--out"]).arg(dir), what)
}

/// Runs `cmd`, asserts that it failed, and returns its stderr.
pub fn run_failing(cmd: &mut Command) -> Result<String, Box<dyn std::error::Error>> {
    let out = cmd.output()?;
    assert!(!out.status.success(), "{cmd:?} succeeded");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}
