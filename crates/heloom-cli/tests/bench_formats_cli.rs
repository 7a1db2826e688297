//! `heloom bench formats` end to end: a quick run refuses every corruption of every kind and
//! times the loader; bad arguments are refused.

mod common;

use common::{heloom, out_dir, run_failing, run_json_out};

#[test]
fn quick_run_refuses_every_corruption() -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir("bench-formats");
    let args = ["bench", "formats", "--quick", "--corruptions", "3000"];
    let v = run_json_out(&args, &dir, "bench formats failed")?;
    assert_eq!(v["accepted_total"], 0);
    let kinds = v["kinds"].as_array().ok_or("no kinds")?;
    let names: Vec<&str> = kinds.iter().filter_map(|k| k["kind"].as_str()).collect();
    for want in [
        "parameters",
        "ciphertext",
        "plaintext",
        "public key",
        "secret key",
        "switching key",
        "evaluation keys",
        "task graph",
        "store spill file",
        "genome frame (hello)",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for k in kinds {
        assert_eq!(k["corruptions"], 3000);
        let refused = k["refused"].as_u64().ok_or("refused")?;
        let original = k["original"].as_u64().ok_or("original")?;
        assert_eq!(refused + original, 3000, "{k}");
        assert!(refused > 2500, "{k}");
        assert_eq!(k["accepted"], 0);
        assert_eq!(k["panics"], 0);
    }
    assert_eq!(v["load"]["n"], 1 << 14);
    assert!(v["load"]["load_gbps"].as_f64().is_some_and(|g| g > 0.0));
    assert!(dir.join("formats.json").exists() && dir.join("formats.txt").exists());
    std::fs::remove_dir_all(&dir)?;

    let err = run_failing(heloom().args(["bench", "formats", "--corruptions", "0"]))?;
    assert!(err.contains("--corruptions must be at least 1"));
    Ok(())
}
