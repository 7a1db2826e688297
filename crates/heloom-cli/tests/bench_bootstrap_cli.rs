//! `heloom bench bootstrap` end to end on its quick chain (N = 2^12, insecure, a second or
//! two): every budget's bootstrap timed by phase and precise to 20 bits, the targets listed,
//! the files written; peers that cannot run listed with their errors; and the refusal of bad
//! arguments.

mod common;

use common::{heloom, out_dir, run_json, run_json_out};

#[test]
fn quick_json_times_each_phase_and_measures_the_precision() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = out_dir("bench-bootstrap-cli");
    // The GPU row on the host emulator of the kernels: the CPU's circuit word for word.
    let args = [
        "bench",
        "bootstrap",
        "--quick",
        "--threads",
        "1,2",
        "--gpu-emulator",
    ];
    let v = run_json_out(&args, &dir, "bench bootstrap --quick failed")?;
    assert_eq!(v["log_n"], 12);
    assert_eq!(v["sparse_weight"], 32);
    assert!(v["machine"]["model"].is_string());
    let rows = v["rows"].as_array().ok_or("no rows")?;
    assert_eq!(rows.len(), 2);
    for (r, t) in rows.iter().zip([1, 2]) {
        assert_eq!(r["threads"], t, "{r}");
        assert_eq!(r["levels_left"], 1, "{r}");
        let total = r["total_s"].as_f64().ok_or("no total")?;
        let parts: f64 = [
            "mod_raise_s",
            "coeffs_to_slots_s",
            "eval_mod_s",
            "slots_to_coeffs_s",
        ]
        .iter()
        .map(|k| r[*k].as_f64().unwrap_or(f64::NAN))
        .sum();
        assert!((total - parts).abs() < 1e-9 && total > 0.0, "{r}");
        assert!(r["worst_bits"].as_f64().is_some_and(|b| b >= 20.0), "{r}");
        assert!(
            r["mean_bits"]
                .as_f64()
                .is_some_and(|b| b >= r["worst_bits"].as_f64().unwrap_or(0.0)),
            "{r}"
        );
    }
    let gpu = &v["gpu"];
    assert_eq!(gpu["device"], "host emulator", "{gpu}");
    assert_eq!(gpu["row"]["levels_left"], 1, "{gpu}");
    assert_eq!(gpu["row"]["worst_bits"], rows[0]["worst_bits"], "{gpu}");
    assert_eq!(gpu["row"]["mean_bits"], rows[0]["mean_bits"], "{gpu}");
    assert!(gpu["device_bytes"].as_u64().is_some_and(|b| b > 0), "{gpu}");
    let targets = v["targets"].as_array().ok_or("no targets")?;
    let names: Vec<&str> = targets.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.iter().any(|n| n.contains("worst slot")), "{names:?}");
    assert!(names.iter().any(|n| n.contains("two threads")), "{names:?}");
    for f in ["bootstrap.json", "bootstrap.txt"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Peers whose toolchains are missing are reported as failed, the benchmark still succeeds,
/// and the speed target stays unmeasured with their errors (no Go or OpenFHE needed).
#[test]
fn peers_that_cannot_run_are_listed_with_their_errors() -> Result<(), Box<dyn std::error::Error>> {
    let cache = out_dir("bench-bootstrap-peers-cache");
    let v = run_json(
        heloom()
            .args(["bench", "bootstrap", "--quick", "--threads", "1", "--json"])
            .args(["--vs", "lattigo,openfhe", "--go", "/nonexistent/go"])
            .args(["--python-openfhe", "/nonexistent/python3.10"])
            .env("XDG_CACHE_HOME", &cache),
        "bench bootstrap --vs with missing peers failed",
    )?;
    let peers = v["peers"].as_array().ok_or("no peers")?;
    assert_eq!(peers.len(), 2, "{peers:?}");
    assert_eq!(peers[0]["peer"], "lattigo");
    let e = peers[0]["error"].as_str().ok_or("no lattigo error")?;
    assert!(e.contains("could not run /nonexistent/go"), "{e}");
    assert_eq!(peers[1]["peer"], "openfhe");
    let e = peers[1]["error"].as_str().ok_or("no openfhe error")?;
    assert!(e.contains("/nonexistent/python3.10"), "{e}");
    assert!(v["peers_caveat"]
        .as_str()
        .is_some_and(|c| c.contains("not a like-for-like")));
    let speed = v["targets"]
        .as_array()
        .ok_or("no targets")?
        .iter()
        .find(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("3x faster"))
        })
        .ok_or("no speed target")?;
    assert!(speed["met"].is_null(), "{speed}");
    let status = speed["status"].as_str().unwrap_or("");
    assert!(
        status.starts_with("not measured: no peer finished (lattigo: "),
        "{status}"
    );
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}

/// `--gpu` on a machine without one: a clear error naming the emulator, before any key is
/// made (where a GPU is present it runs).
#[test]
fn gpu_without_a_driver_is_a_clear_error() -> Result<(), Box<dyn std::error::Error>> {
    let out = heloom()
        .args([
            "bench",
            "bootstrap",
            "--quick",
            "--threads",
            "1",
            "--gpu",
            "--json",
        ])
        .output()?;
    if out.status.success() {
        eprintln!("a GPU is present: --gpu ran");
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--gpu-emulator"), "{err}");
    assert!(!err.contains("generating keys"), "{err}");
    assert!(out.stdout.is_empty());
    Ok(())
}

#[test]
fn bad_arguments_are_refused() -> Result<(), Box<dyn std::error::Error>> {
    for args in [
        ["--threads", "0"],
        ["--reps", "0"],
        ["--vs", "seal"],
        ["--openfhe-max-gb", "0"],
        ["--gpu", "--gpu-emulator"],
    ] {
        let out = heloom()
            .args(["bench", "bootstrap", "--quick"])
            .args(args)
            .output()?;
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty());
    }
    Ok(())
}
