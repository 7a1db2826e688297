//! `heloom mnist` end to end on a few held-out images: the JSON fields the issue asks for,
//! agreement with the f64 network, and clear errors.

use std::process::Command;

fn heloom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_heloom"))
}

#[test]
fn mnist_json_reports_accuracy_and_speed() -> Result<(), Box<dyn std::error::Error>> {
    for packing in ["batch", "single"] {
        let out = heloom()
            .args(["mnist", "--images", "4", "--packing", packing, "--json"])
            .output()?;
        assert!(
            out.status.success(),
            "{packing}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
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
    let out = heloom().args(["mnist", "--images", "0"]).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("images must be"));
    let out = heloom().args(["mnist", "--word-bits", "48"]).output()?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("32 or 64"));
    let out = heloom().args(["mnist", "--packing", "diagonal"]).output()?;
    assert!(!out.status.success());
    Ok(())
}
