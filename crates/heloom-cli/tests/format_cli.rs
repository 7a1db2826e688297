//! `heloom format`: inspect a version-2 object, refuse a version-1 one with advice, upgrade
//! version-1 files (parameters alone, other kinds with their parameters), and refuse a
//! corrupted file.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{heloom, out_dir};
use std::path::PathBuf;

fn v1(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../heloom-ckks/tests/data/v1")
        .join(name)
}

fn run(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = heloom().args(args).output().expect("heloom runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inspect_and_upgrade() {
    let dir = out_dir("format-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p1 = v1("params64.bin");
    let p2 = dir.join("params.bin");
    let ct2 = dir.join("ct.bin");
    let os = |p: &PathBuf| p.as_os_str().to_owned();
    let s = |x: &str| std::ffi::OsString::from(x);

    // Version 1 is refused by inspect, with the command that converts it.
    let (ok, _, err) = run(&[&s("format"), &s("inspect"), &os(&p1)]);
    assert!(
        !ok && err.contains("format version 1") && err.contains("heloom format upgrade"),
        "{err}"
    );
    // Parameters upgrade alone; a ciphertext needs --params.
    let (ok, out, err) = run(&[&s("format"), &s("upgrade"), &os(&p1), &os(&p2)]);
    assert!(ok, "{err}");
    assert!(out.contains("version 2"), "{out}");
    let c1 = v1("ciphertext64.bin");
    let (ok, _, err) = run(&[&s("format"), &s("upgrade"), &os(&c1), &os(&ct2)]);
    assert!(!ok && err.contains("--params"), "{err}");
    let (ok, _, err) = run(&[
        &s("format"),
        &s("upgrade"),
        &os(&c1),
        &os(&ct2),
        &s("--params"),
        &os(&p1),
    ]);
    assert!(ok, "{err}");
    // The upgraded ciphertext inspects, and loads completely with its parameters.
    let (ok, out, err) = run(&[
        &s("format"),
        &s("inspect"),
        &os(&ct2),
        &s("--params"),
        &os(&p2),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("checksum ok") && out.contains("kind                 Ciphertext"),
        "{out}"
    );
    assert!(
        out.contains("loaded, every field checked: ciphertext: level 1, 2 polynomials"),
        "{out}"
    );
    // A flipped bit is refused.
    let mut bytes = std::fs::read(&ct2).unwrap();
    bytes[100] ^= 4;
    let bad = dir.join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let (ok, _, err) = run(&[&s("format"), &s("inspect"), &os(&bad)]);
    assert!(!ok && err.contains("checksum mismatch"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
