//! `heloom bench gpu` end to end: the emulator run's JSON and files, and the clear refusal
//! (exit status 2) where there is no GPU.

mod common;

use common::{heloom, out_dir, run_json_out};
// The benchmark's own list of operations, in report order.
use heloom_bench::gpu::OPS;

#[test]
fn emulator_json_has_every_op_verified() -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir("bench-gpu-cli");
    let args = ["bench", "gpu", "--emulator"];
    let v = run_json_out(&args, &dir, "bench gpu --emulator failed")?;
    assert_eq!(v["emulated"], true);
    assert!(v["gpu"]["name"].is_string());
    assert!(v["gpu"].get("compute_capability").is_some());
    assert!(v["gpu"]["memory"].is_u64());
    assert!(v["cpu"]["model"].is_string());
    assert!(v["cpu"]["cores"].as_u64().is_some_and(|c| c >= 1));
    let rows = v["rows"].as_array().ok_or("no rows")?;
    for op in OPS {
        assert!(
            rows.iter().any(|r| r["op"] == op),
            "no row for {op}: {rows:?}"
        );
    }
    for word in [64u64, 32] {
        assert!(
            rows.iter()
                .any(|r| r["word_bits"] == word && r["op"] == "multiply+relin"),
            "no {word}-bit rows"
        );
    }
    for r in rows {
        assert_eq!(r["verified"], true, "{r}");
        for k in ["gpu_us", "cpu1_us", "cpu_all_us"] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {r}");
        }
        assert!(r["n"].as_u64().is_some_and(|n| n.is_power_of_two()));
        assert!(r["limbs"].as_u64().is_some_and(|l| l >= 2));
        // The emulator's times are not speeds: no speedups are claimed.
        assert!(
            r["speedup_1"].is_null() && r["speedup_all"].is_null(),
            "{r}"
        );
    }
    let targets = v["targets"].as_array().ok_or("no targets")?;
    assert_eq!(targets.len(), 3);
    for t in targets {
        assert!(t["met"].is_null(), "{t}");
        assert_eq!(t["status"], "not measured: emulator");
        assert!(t["target"].as_f64().is_some() && t["name"].is_string());
    }
    for ext in ["json", "txt", "svg"] {
        let p = dir.join(format!("gpu-host-emulator.{ext}"));
        assert!(p.exists(), "{} missing", p.display());
    }
    let txt = std::fs::read_to_string(dir.join("gpu-host-emulator.txt"))?;
    assert!(txt.contains("emulator (not a speed)"));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn without_a_gpu_it_exits_2_and_says_why() -> Result<(), Box<dyn std::error::Error>> {
    // Only the cheapest run: a GPU machine would otherwise do the full benchmark here.
    let out = heloom()
        .args(["bench", "gpu", "--quick", "--json"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        // A GPU is present: the run must have named it.
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert_eq!(v["emulated"], false);
        let name = v["gpu"]["name"].as_str().unwrap_or_default();
        assert!(!name.is_empty(), "no GPU name in {v}");
        eprintln!("a GPU is present ({name}); the no-GPU refusal was not exercised");
        return Ok(());
    }
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("GPU"), "{stderr}");
    assert!(stderr.contains("--emulator"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout without a GPU");
    Ok(())
}
