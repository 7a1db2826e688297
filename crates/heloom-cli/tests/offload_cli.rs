//! `heloom offload` end to end: the JSON of a small comparison and clear errors for bad flags.

mod common;

use common::{heloom, run_failing, run_json_out};

fn out_dir(tag: &str) -> std::path::PathBuf {
    common::out_dir(&format!("offload-cli-{tag}"))
}

#[test]
fn compare_json_has_every_method_and_all_items() -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir("json");
    let args = [
        "offload",
        "--compare",
        "--sizes",
        "16,256",
        "--items",
        "200",
        "--reps",
        "1",
        "--no-plots",
    ];
    let v = run_json_out(&args, &dir, "offload failed")?;
    assert!(v["machine"]["cpu_model"].is_string());
    assert!(v["machine"]["cores"].as_u64().is_some_and(|c| c >= 1));
    assert_eq!(v["load"], 0);
    let devices: Vec<String> = v["devices"]
        .as_array()
        .ok_or("no devices")?
        .iter()
        .filter_map(|d| d["name"].as_str().map(String::from))
        .collect();
    assert_eq!(devices.len(), 2, "default devices are cpu and soft");
    let runs = v["runs"].as_array().ok_or("no runs")?;
    let mut expected: Vec<String> = devices.clone();
    expected.extend(["round-robin", "polling", "pull", "heloom"].map(String::from));
    for method in &expected {
        for size in [16u64, 256, 0] {
            let r = runs
                .iter()
                .find(|r| r["method"] == method.as_str() && r["size"] == size)
                .ok_or_else(|| format!("no run of {method} at size {size}"))?;
            let ms = r["ms"].as_f64().ok_or("ms")?;
            assert!(ms > 0.0, "{method} {size}: ms {ms}");
            let eff = r["efficiency"].as_f64().ok_or("efficiency")?;
            assert!(eff > 0.0 && eff.is_finite(), "{method} {size}: {eff}");
            assert_eq!(r["items"], 200);
            let items = r["items_per_device"]
                .as_object()
                .ok_or("items_per_device")?;
            assert_eq!(items.len(), 2);
            let sum: f64 = items.values().filter_map(|x| x.as_f64()).sum();
            assert!((sum - 200.0).abs() < 1e-6, "{method} {size}: {sum} items");
        }
    }
    assert!(v["targets"]["per_run"].is_array());
    assert!(dir.join("offload.json").exists());
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn bad_flags_fail_clearly() -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir("bad");
    let cases: [(&[&str], &str); 5] = [
        (&["--compare", "--devices", "bogus"], "bogus"),
        (&["--compare", "--cipher", "aes-999"], "aes-999"),
        (&["--compare", "--items", "0"], "--items"),
        (&["--compare", "--methods", "fastest"], "fastest"),
        (&["--compare", "--sizes", "0,16"], "--sizes"),
    ];
    for (args, needle) in cases {
        let err = run_failing(heloom().arg("offload").args(args).arg("--out").arg(&dir))?;
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // No mode at all is a usage error.
    run_failing(heloom().arg("offload"))?;
    Ok(())
}

#[test]
fn he_jobs_run_on_every_balancer_and_decrypt() -> Result<(), Box<dyn std::error::Error>> {
    let args = [
        "offload", "--he", "--log-n", "11", "--jobs", "4", "--reps", "1",
    ];
    let v = run_json_out(&args, &out_dir("he"), "offload --he failed")?;
    let runs = v["runs"].as_array().ok_or("no runs")?;
    let methods: Vec<&str> = runs.iter().filter_map(|r| r["method"].as_str()).collect();
    for m in ["cpu-pool:1", "round-robin", "polling", "pull", "heloom"] {
        assert!(methods.contains(&m), "{m} missing from {methods:?}");
    }
    for r in runs {
        assert!(r["max_error"].as_f64().ok_or("max_error")? < 1e-4);
        let jobs: f64 = r["items_per_device"]
            .as_object()
            .ok_or("items")?
            .values()
            .filter_map(|x| x.as_f64())
            .sum();
        assert!((jobs - 4.0).abs() < 1e-9);
    }
    let err = run_failing(heloom().args(["offload", "--he", "--devices", "soft"]))?;
    assert!(err.contains("AES engines"));
    Ok(())
}
