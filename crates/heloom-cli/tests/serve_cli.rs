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

/// `heloom serve` as its own process and `heloom client` as another: upload a key set and a
/// ciphertext, submit an e^x job, wait, save the result, decrypt it here.
#[test]
fn serve_and_client_processes() {
    use heloom_ckks::{keygen, Context, Decryptor, Encryptor};
    let dir = out_dir("serve-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let token = {
        let out = heloom()
            .args(["serve", "token", "create", "--tenant", "cli", "--data"])
            .arg(&data)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let mut cmd = heloom();
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--allow-insecure",
        "--data",
    ])
    .arg(&data);
    // The server's log is drained (and dropped) so that it never blocks on a full pipe.
    let heloom_bench::spawn::Listening {
        child: mut server,
        url,
    } = heloom_bench::spawn::spawn_listening(&mut cmd, |_| {})
        .expect("the server prints its address");

    let ctx = Context::<u64>::new(heloom_runtime::workload::default_params(12).unwrap()).unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let mut key_file = ctx.params().to_bytes();
    key_file.extend_from_slice(&keys.evaluation_keys.to_bytes());
    std::fs::write(dir.join("keys.bin"), key_file).unwrap();
    let x: Vec<f64> = (0..ctx.n() / 2)
        .map(|i| (i % 100) as f64 / 100.0 - 0.5)
        .collect();
    let ct = Encryptor::new(&ctx).encrypt(&x, &keys.public_key).unwrap();
    std::fs::write(dir.join("x.bin"), ct.to_bytes()).unwrap();

    let client = |args: &[&str]| {
        let out = heloom()
            .arg("client")
            .args(["--url", &url])
            .args(args)
            .env("HELOOM_TOKEN", &token)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "heloom client {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let uploaded = client(&["upload", "keys.bin"]);
    let key: serde_json::Value = serde_json::from_str(&uploaded).unwrap();
    assert_eq!(key["kind"], "keys");
    let input: serde_json::Value = serde_json::from_str(&client(&["upload", "x.bin"])).unwrap();
    assert_eq!(input["kind"], "ciphertext");
    let job: serde_json::Value = serde_json::from_str(&client(&[
        "submit",
        "--idempotency-key",
        "cli-1",
        "--key",
        key["id"].as_str().unwrap(),
        "--input",
        input["id"].as_str().unwrap(),
        "--task",
        "polynomial:1,0.5,0.25",
        "--wait",
    ]))
    .unwrap();
    assert_eq!(job["state"], "done", "{job}");
    let id = job["id"].as_i64().unwrap().to_string();
    client(&["result", &id, "--out", "y.bin"]);
    let y = heloom_ckks::Ciphertext::<u64>::from_bytes(
        &ctx,
        &std::fs::read(dir.join("y.bin")).unwrap(),
    )
    .unwrap();
    let got = Decryptor::new(&ctx, &keys.secret_key)
        .unwrap()
        .decrypt(&y)
        .unwrap();
    let err = x
        .iter()
        .zip(&got)
        .map(|(v, g)| (1.0 + 0.5 * v + 0.25 * v * v - g).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-4, "decrypted error {err}");
    let jobs: serde_json::Value = serde_json::from_str(&client(&["jobs"])).unwrap();
    assert_eq!(jobs.as_array().map(Vec::len), Some(1));

    // A missing token is a clear error, not a crash.
    let out = heloom()
        .args(["client", "--url", &url, "jobs"])
        .env_remove("HELOOM_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HELOOM_TOKEN"));
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--ray` with a Python that cannot run the bridge fails at once and says what to install.
#[test]
fn ray_without_its_python_says_what_to_install() {
    let dir = out_dir("serve-cli-ray");
    let _ = std::fs::remove_dir_all(&dir);
    let out = heloom()
        .args(["serve", "--data", dir.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--ray", "127.0.0.1:1"])
        .args(["--ray-python", "/nonexistent/heloom-test/python3"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("pip install heloom[ray]"), "{err}");
    assert!(err.contains("--ray-python"), "{err}");
}
