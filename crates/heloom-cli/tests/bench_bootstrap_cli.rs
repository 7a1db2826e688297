//! `heloom bench bootstrap` end to end on its quick chain (N = 2^12, insecure, a second or
//! two): every budget's bootstrap timed by phase and precise to 20 bits, the targets listed,
//! the files written; and the refusal of bad arguments.

mod common;

use common::{heloom, out_dir, run_json_out};

#[test]
fn quick_json_times_each_phase_and_measures_the_precision() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = out_dir("bench-bootstrap-cli");
    let args = ["bench", "bootstrap", "--quick", "--threads", "1,2"];
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

#[test]
fn bad_arguments_are_refused() -> Result<(), Box<dyn std::error::Error>> {
    for args in [["--threads", "0"], ["--reps", "0"]] {
        let out = heloom()
            .args(["bench", "bootstrap", "--quick"])
            .args(args)
            .output()?;
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty());
    }
    Ok(())
}
