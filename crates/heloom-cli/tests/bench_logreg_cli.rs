//! `heloom bench logreg --quick` end to end (N = 2^10, insecure, about a second): four
//! iterations of encrypted logistic-regression training, every one after the first preceded
//! by a bootstrap, the weights within 2^-12 of the same descent in the clear, and the files
//! written.

mod common;

use common::{out_dir, run_json_out};

#[test]
fn quick_training_bootstraps_between_iterations() -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir("bench-logreg-cli");
    let args = ["bench", "logreg", "--quick", "--iterations", "4"];
    let v = run_json_out(&args, &dir, "bench logreg --quick failed")?;
    assert_eq!(v["samples"], 64);
    assert_eq!(v["features"], 8);
    assert_eq!(v["levels_per_iteration"], 5);
    assert_eq!(v["bootstraps"], 3);
    let rows = v["iterations"].as_array().ok_or("no iterations")?;
    let booted: Vec<bool> = rows
        .iter()
        .map(|r| r["bootstrapped"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(booted, vec![false, true, true, true]);
    let err = v["max_error"].as_f64().ok_or("no max_error")?;
    assert!(err < 2f64.powi(-12), "max error {err}");
    let acc = v["accuracy"].as_f64().ok_or("no accuracy")?;
    assert!(acc >= 0.8, "accuracy {acc}");
    assert_eq!(v["weights"].as_array().map(Vec::len), Some(8));
    for f in ["logreg.json", "logreg.txt"] {
        assert!(dir.join(f).is_file(), "{f} not written");
    }
    Ok(())
}
