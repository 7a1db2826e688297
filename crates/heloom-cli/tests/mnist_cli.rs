//! `heloom mnist` end to end on a few held-out images: the JSON fields the issue asks for,
//! agreement with the f64 network, and clear errors.

mod common;

use common::{heloom, run_failing, run_json};

#[test]
fn mnist_json_reports_accuracy_and_speed() -> Result<(), Box<dyn std::error::Error>> {
    for packing in ["batch", "single"] {
        let v = run_json(
            heloom().args(["mnist", "--images", "4", "--packing", packing, "--json"]),
            packing,
        )?;
        for field in [
            "plain_accuracy",
            "encrypted_accuracy",
            "agreement",
            "images",
            "seconds",
            "images_per_s",
            "peak_memory_bytes",
        ] {
            assert!(v.get(field).is_some(), "{packing}: no {field}");
        }
        assert_eq!(v["images"], 4);
        assert_eq!(v["agreement"], 1.0, "{packing}");
        assert_eq!(v["plain_accuracy"], v["encrypted_accuracy"]);
        assert_eq!(v["packing"], packing);
    }
    Ok(())
}

#[test]
fn mnist_refuses_bad_arguments() -> Result<(), Box<dyn std::error::Error>> {
    let err = run_failing(heloom().args(["mnist", "--images", "0"]))?;
    assert!(err.contains("images must be"));
    let err = run_failing(heloom().args(["mnist", "--word-bits", "48"]))?;
    assert!(err.contains("32 or 64"));
    run_failing(heloom().args(["mnist", "--packing", "diagonal"]))?;
    Ok(())
}
