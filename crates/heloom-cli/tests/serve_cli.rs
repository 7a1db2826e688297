//! `heloom serve token ...`: a token is printed once, lists and revokes by tenant, bad names
//! are refused with the rule.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{heloom, out_dir};

#[test]
fn token_create_list_revoke() {
    let dir = out_dir("serve-cli");
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.to_str().unwrap();
    let run = |args: &[&str], token: Option<&str>| {
        let mut cmd = heloom();
        cmd.args(args);
        if let Some(t) = token {
            cmd.env("HELOOM_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let create = [
        "serve", "token", "create", "--data", data, "--tenant", "alice",
    ];
    let (ok, token, err) = run(&create, None);
    assert!(ok, "{err}");
    let token = token.trim().to_string();
    assert!(token.starts_with("hlm_") && token.len() == 68, "{token}");
    assert!(err.contains("not shown again"), "{err}");
    let (ok, second, _) = run(&create, None);
    assert!(ok && second.trim() != token);
    let list = ["serve", "token", "list", "--data", data];
    let (ok, out, _) = run(&list, None);
    assert!(ok);
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["alice", "2"]),
        "{out}"
    );
    let revoke = ["serve", "token", "revoke", "--data", data];
    let (ok, out, _) = run(&revoke, Some(&token));
    assert!(ok && out.trim() == "revoked", "{out}");
    let (ok, _, err) = run(&revoke, Some(&token));
    assert!(!ok && err.contains("no active token"), "{err}");
    let (_, out, _) = run(&list, None);
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["alice", "1"]),
        "{out}"
    );
    let (ok, _, err) = run(
        &[
            "serve", "token", "create", "--data", data, "--tenant", "Bad Name",
        ],
        None,
    );
    assert!(!ok && err.contains("1 to 64 characters"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
