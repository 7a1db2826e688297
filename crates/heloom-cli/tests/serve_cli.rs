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
    // `--profile measure`: this machine's profile, measured before listening and kept.
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--allow-insecure",
        "--profile",
        "measure",
        "--data",
    ])
    .arg(&data);
    // The server's log is drained (and dropped) so that it never blocks on a full pipe.
    let heloom_bench::spawn::Listening {
        child: mut server,
        url,
    } = heloom_bench::spawn::spawn_listening(&mut cmd, |_| {})
        .expect("the server prints its address");
    let measured = heloom_runtime::Profile::load(&data.join("profile.json").to_string_lossy())
        .expect("the measured profile is kept in the data directory");
    assert_eq!(
        heloom_runtime::CostModel::capacity(&measured),
        heloom_pool::cores()
    );

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

/// `--local-nodes`: the front places every job on node servers it started on this machine
/// (the `--ray` data path without Ray); the load test's results all decrypt correctly, both
/// nodes run jobs; a node server killed is started again, one that stops answering
/// (SIGSTOP) has its jobs placed elsewhere and takes jobs again once it answers (SIGCONT);
/// and killing the front (SIGKILL) stops its node servers.
#[test]
fn local_nodes_run_every_job() {
    let dir = out_dir("serve-local-nodes");
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    let mut cmd = heloom();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--allow-insecure"])
        .args([
            "--local-nodes",
            "2",
            "--node-threads",
            "1",
            "--node-timeout",
            "3",
        ])
        .arg("--data")
        .arg(&data);
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = std::sync::Arc::clone(&log);
    let heloom_bench::spawn::Listening { child, url } =
        heloom_bench::spawn::spawn_listening(&mut cmd, move |line| {
            l2.lock().unwrap().push(line.to_string())
        })
        .expect("the front prints its address");
    // Killed however the test ends (a failed assertion must not leave the servers running).
    struct Front(std::process::Child);
    impl Drop for Front {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut front = Front(child);
    // The front's own address, not a node server's (their lines are reworded).
    let nodes: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| l.split("node server ").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .filter(|u| u.starts_with("http://"))
        .map(str::to_string)
        .collect();
    assert_eq!(nodes.len(), 2, "{:?}", log.lock().unwrap());
    assert!(!nodes.contains(&url), "{url} is a node's address");

    let out = heloom()
        .args(["loadtest", "--url", &url, "--data"])
        .arg(&data)
        .args(["--tenants", "2", "--rate", "12", "--duration", "2"])
        .args(["--log-n", "12", "--clients", "16", "--json", "--out"])
        .arg(dir.join("loadtest"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = &r["overall"];
    let submitted = o["submitted"].as_u64().unwrap();
    assert!(submitted > 0, "{o:#}");
    assert_eq!(o["done"].as_u64(), Some(submitted), "{o:#}");
    assert_eq!(o["wrong"], 0, "{o:#}");

    let metrics = plain_get(&url, "/metrics");
    assert!(metrics.contains("heloom_ray_nodes 2"), "{metrics}");
    let jobs: Vec<u64> = metrics
        .lines()
        .filter(|l| l.starts_with("heloom_ray_node_jobs_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(jobs.len(), 2, "{metrics}");
    assert!(jobs.iter().all(|&j| j > 0), "a node ran no job: {jobs:?}");
    assert!(
        jobs.iter().sum::<u64>() >= submitted,
        "jobs per node {jobs:?}"
    );
    // Each tenant has 4 inputs: a node receives each at most once (unless a job was lost),
    // and the other jobs reuse them there.
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let (sent, reused) = (
        counter("heloom_ray_node_objects_sent_total"),
        counter("heloom_ray_node_objects_reused_total"),
    );
    assert!(
        sent <= 2 * 2 * 4,
        "{sent} inputs sent to 2 nodes: {metrics}"
    );
    assert_eq!(sent + reused, jobs.iter().sum::<u64>(), "{metrics}");
    // Results are deleted on the nodes once the front has them: each node keeps at most the
    // two key sets and the eight inputs.
    assert!(
        counter("heloom_ray_node_objects_deleted_total") > 0,
        "{metrics}"
    );
    let node_dirs: Vec<std::path::PathBuf> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("nodes: local-") && l.contains("token create --data /"))
        .filter_map(|l| l.split("--data ").nth(1)?.split_whitespace().next())
        .map(std::path::PathBuf::from)
        .collect();
    assert_eq!(node_dirs.len(), 2, "{:?}", log.lock().unwrap());
    for d in &node_dirs {
        let mut files = 0;
        for tenant in std::fs::read_dir(d.join("objects")).unwrap() {
            files += std::fs::read_dir(tenant.unwrap().path()).unwrap().count();
        }
        assert!(
            files <= 2 + 8,
            "{files} objects left on node {}",
            d.display()
        );
        // Results are segment records, not files: no row of one is left either.
        let node = heloom_serve::State::open_scratch(d).unwrap();
        for (tenant, _) in node.tenants().unwrap() {
            let results = node
                .objects(&tenant)
                .unwrap()
                .into_iter()
                .filter(|o| o.kind == heloom_serve::ObjectKind::Result)
                .count();
            assert_eq!(results, 0, "results left on node {}", d.display());
            // The front deletes a job's record there once it has the job's end.
            let jobs = node.jobs(&tenant).unwrap();
            assert!(jobs.is_empty(), "{} job records left on node", jobs.len());
        }
    }

    // A node server killed with SIGKILL leaves, is started again (a second "node server"
    // line for local-0) and runs jobs again.
    let node_urls = |log: &[String]| -> Vec<String> {
        log.iter()
            .filter_map(|l| l.split("node server ").nth(1))
            .filter_map(|r| r.split_whitespace().next())
            .filter(|u| u.starts_with("http://"))
            .map(str::to_string)
            .collect()
    };
    let pid = server_pid(&node_dirs[0]).expect("node server 0's process");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while node_urls(&log.lock().unwrap()).len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the node server was not started again: {:?}",
            log.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("starting it again in 1 s")));
    // A small load test whose every job must end done and decrypt correctly.
    let loadtest = |name: &str| {
        let out = heloom()
            .args(["loadtest", "--url", &url, "--data"])
            .arg(&data)
            .args(["--tenants", "1", "--rate", "8", "--duration", "1"])
            .args(["--log-n", "12", "--clients", "8", "--json", "--out"])
            .arg(dir.join(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["overall"]["wrong"], 0, "{:#}", r["overall"]);
        assert_eq!(
            r["overall"]["done"], r["overall"]["submitted"],
            "{:#}",
            r["overall"]
        );
    };
    loadtest("loadtest-after-restart");
    assert!(plain_get(&url, "/metrics").contains("heloom_ray_nodes 2"));

    // A node server that stops answering (SIGSTOP: alive, so its supervisor keeps it): the
    // jobs placed on it go elsewhere after --node-timeout, it leaves placement, and it takes
    // jobs again once it answers (SIGCONT).
    let pid = server_pid(&node_dirs[1]).expect("node server 1's process");
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig}");
    };
    // Resumed however the test ends.
    struct Stopped(u32);
    impl Drop for Stopped {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &self.0.to_string()])
                .status();
        }
    }
    signal("-STOP");
    let stopped = Stopped(pid);
    loadtest("loadtest-node-stopped");
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("does not answer")),
        "{:?}",
        log.lock().unwrap()
    );
    assert!(plain_get(&url, "/metrics").contains("heloom_ray_nodes 1"));
    signal("-CONT");
    drop(stopped);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !plain_get(&url, "/metrics").contains("heloom_ray_nodes 2") {
        assert!(
            std::time::Instant::now() < deadline,
            "the node did not come back: {:?}",
            log.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let metrics = plain_get(&url, "/metrics");
    assert!(
        metrics.contains("heloom_ray_nodes_returned_total 1"),
        "{metrics}"
    );
    assert!(log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("answers again")));
    loadtest("loadtest-node-back");
    let nodes = node_urls(&log.lock().unwrap());

    // SIGKILL: the bridge sees its stdin close and stops the node servers.
    front.0.kill().unwrap();
    front.0.wait().unwrap();
    let gone = |u: &str| {
        let addr = u.trim_start_matches("http://");
        std::net::TcpStream::connect(addr).is_err()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !nodes.iter().all(|u| gone(u)) {
        assert!(
            std::time::Instant::now() < deadline,
            "node servers outlived the front: {nodes:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The pid of the `heloom serve` process whose `--data` is `dir`.
fn server_pid(dir: &std::path::Path) -> Option<u32> {
    let want = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmd
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect();
        let serving = args.iter().any(|a| a == "--listen");
        let data = args.windows(2).any(|w| w[0] == "--data" && w[1] == want);
        (serving && data).then_some(pid)
    })
}

/// A plain HTTP GET (the test needs no TLS client).
fn plain_get(url: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}
