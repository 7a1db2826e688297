//! `heloom loadtest` against a `heloom serve` it spawns (N = 2^12, 2 tenants, about 2 s of
//! arrivals): a normal run ends with every job done and correct, and a durability run that
//! kills the server twice loses, duplicates and miscomputes nothing.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{heloom, out_dir, run_failing, run_json_out};

const SMALL: [&str; 12] = [
    "loadtest",
    "--tenants",
    "2",
    "--rate",
    "10",
    "--duration",
    "2",
    "--log-n",
    "12",
    "--threads",
    "2",
    "--clients=32",
];

#[test]
fn normal_run_completes_every_job_correctly() {
    let dir = out_dir("loadtest-normal");
    // Results checked after the run here (the durability run checks them during it); the
    // spawned server gets its cost profile from the load test (written to its data directory).
    let args: Vec<&str> = SMALL
        .iter()
        .copied()
        .chain(["--check-after", "--profile", "xeon-phi-7230f"])
        .collect();
    let r = run_json_out(&args, &dir, "heloom loadtest").unwrap();
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["check_after"], true);
    let o = &r["overall"];
    let submitted = o["submitted"].as_u64().unwrap();
    assert!(submitted > 0, "{o:#}");
    assert_eq!(o["done"].as_u64(), Some(submitted), "{o:#}");
    assert_eq!(o["accepted"].as_u64(), Some(submitted));
    assert_eq!(o["wrong"], 0);
    assert_eq!(o["failed"], 0);
    assert!(o["max_error"].as_f64().unwrap() <= r["error_bound"].as_f64().unwrap());
    for k in ["jain_throughput", "jain_latency"] {
        let j = r["fairness"][k].as_f64().unwrap();
        assert!((0.0..=1.0 + 1e-12).contains(&j), "{k} = {j}");
    }
    assert!(r["fairness"]["formula"]
        .as_str()
        .unwrap()
        .contains("(sum x_i)^2"));
    assert_eq!(r["per_tenant"].as_array().unwrap().len(), 2);
    assert!(r["durability"].is_null());
    assert!(r["insecure"].as_bool().unwrap());
    assert!(!r["machine"]["model"].as_str().unwrap().is_empty());
    for f in [
        "loadtest.json",
        "loadtest.txt",
        "jobs.csv",
        "metrics.csv",
        "latency.svg",
        "queue.svg",
        "busy.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let text = std::fs::read_to_string(dir.join("loadtest.txt")).unwrap();
    assert!(text.contains("Jain's fairness index"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn durability_run_loses_nothing() {
    let dir = out_dir("loadtest-kill");
    let mut args = SMALL.to_vec();
    args.extend(["--kill-every", "1", "--kills", "2"]);
    let r = run_json_out(&args, &dir, "heloom loadtest --kill-every").unwrap();
    assert_eq!(r["ok"], true, "{r:#}");
    let d = &r["durability"];
    assert_eq!(d["kills"], 2, "{d:#}");
    assert_eq!(d["lost"], 0, "{d:#}");
    assert_eq!(d["duplicated"], 0, "{d:#}");
    assert_eq!(d["wrong"], 0, "{d:#}");
    assert_eq!(d["failed"], 0, "{d:#}");
    let accepted = d["accepted"].as_u64().unwrap();
    assert!(accepted > 0);
    assert_eq!(
        d["completed_exactly_once"].as_u64(),
        Some(accepted),
        "{d:#}"
    );
    assert_eq!(d["restart_ms"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn killing_needs_a_spawned_server() {
    let err = run_failing(heloom().args([
        "loadtest",
        "--url",
        "http://127.0.0.1:1",
        "--data",
        "/nonexistent",
        "--kill-every",
        "1",
    ]))
    .unwrap();
    assert!(err.contains("--kill-every"), "{err}");
    let err = run_failing(heloom().args(["loadtest", "--kills", "2"])).unwrap();
    assert!(err.contains("--kill-every"), "{err}");
}

#[test]
fn closed_loop_keeps_one_job_per_client_in_flight() {
    // Three client threads for 2 s: each submits its next job when its last one ends, so far
    // more jobs than the 20 the rate would offer, and never more than 3 at once.
    let dir = out_dir("loadtest-closed");
    let args: Vec<&str> = SMALL
        .iter()
        .copied()
        .filter(|a| !a.starts_with("--clients"))
        .chain(["--clients=3", "--closed-loop", "--check-after"])
        .collect();
    let r = run_json_out(&args, &dir, "heloom loadtest").unwrap();
    assert_eq!(r["ok"], true, "{r:#}");
    let o = &r["overall"];
    let submitted = o["submitted"].as_u64().unwrap();
    assert!(
        submitted > 30,
        "closed loop ran only {submitted} jobs: {o:#}"
    );
    assert_eq!(o["done"].as_u64(), Some(submitted), "{o:#}");
    assert_eq!(o["wrong"], 0);
    // Each job's span, submission to the client seeing it done, from jobs.csv.
    let csv = std::fs::read_to_string(dir.join("jobs.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (sub, lat) = (col("submitted_s"), col("latency_ms"));
    let mut events: Vec<(f64, i32)> = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let s: f64 = f[sub].parse().unwrap();
        let l: f64 = f[lat].parse().unwrap();
        // jobs.csv rounds times to 1 ms (latency to 0.1 ms): spans shrunk by that much, so
        // a job that starts as another ends is not counted as overlapping it.
        events.push((s + 0.0006, 1));
        events.push((s + l / 1e3 - 0.0006, -1));
    }
    // Ends sort before starts at the same instant.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0, 0);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert!(
        most <= 3,
        "{most} jobs in flight with 3 closed-loop clients"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
