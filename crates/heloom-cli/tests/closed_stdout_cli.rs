//! A reader that closed heloom's output early (`heloom info | head -1`): the process ends
//! quietly with 141 (128 + SIGPIPE, as other tools end), not with a panic and a backtrace.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

mod common;

use common::heloom;
use std::process::Stdio;

#[test]
fn a_closed_stdout_ends_heloom_quietly() {
    // The pipe's reading end is gone before heloom starts: its first line hits a closed pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = heloom()
        .arg("info")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
