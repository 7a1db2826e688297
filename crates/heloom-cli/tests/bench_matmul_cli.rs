//! `heloom bench matmul` end to end: the quick run's JSON (every stage timed, every product
//! close to the plaintext one) and files, and the refusal of bad arguments.

mod common;

use common::{heloom, out_dir, run_json_out};

#[test]
fn quick_json_has_every_configuration_with_small_errors() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = out_dir("bench-matmul-cli");
    let args = ["bench", "matmul", "--quick"];
    let v = run_json_out(&args, &dir, "bench matmul --quick failed")?;
    assert_eq!(v["benchmark"], "matmul");
    assert_eq!(v["quick"], true);
    assert!(v["cpu"]["model"].is_string());
    let cores = v["cpu"]["cores"].as_u64().ok_or("no cores")?;
    let sets = v["sets"].as_array().ok_or("no sets")?;
    assert_eq!(sets.len(), 2);
    for s in sets {
        assert_eq!(s["n"], 1 << 14);
        assert_eq!(s["levels"], 14);
        assert!(s["log_qp"].as_f64().is_some_and(|x| x <= 438.0), "{s}");
    }
    let rows = v["rows"].as_array().ok_or("no rows")?;
    let threads = if cores > 1 { 2 } else { 1 };
    // Two algorithms x two word sizes x two input levels x the thread budgets.
    assert_eq!(rows.len(), 2 * 2 * 2 * threads);
    for algo in ["halevi-shoup", "jiang"] {
        for word in [32u64, 64] {
            assert!(
                rows.iter()
                    .any(|r| r["algo"] == algo && r["word_bits"] == word),
                "no {algo} row on {word}-bit words"
            );
        }
    }
    for r in rows {
        assert_eq!(r["d"], 16, "{r}");
        for k in [
            "encode_encrypt_ms",
            "product_ms",
            "rescale_ms",
            "decrypt_decode_ms",
        ] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {r}");
        }
        let total = r["total_ms"].as_f64().ok_or("no total")?;
        let sum: f64 = [
            "encode_encrypt_ms",
            "product_ms",
            "rescale_ms",
            "decrypt_decode_ms",
        ]
        .iter()
        .filter_map(|k| r[k].as_f64())
        .sum();
        assert!((total - sum).abs() <= 1e-6 * total, "{r}");
        // Entries in [-1, 1], d = 16, scale 2^25: errors well below 1e-2.
        let err = r["max_error"].as_f64().ok_or("no error")?;
        assert!(err < 1e-2, "{r}");
        let (inl, outl) = (r["input_level"].as_u64(), r["output_level"].as_u64());
        let used = if r["algo"] == "jiang" { 3 } else { 1 };
        assert_eq!(inl.zip(outl).map(|(i, o)| i - o), Some(used), "{r}");
    }
    let targets = v["targets"].as_array().ok_or("no targets")?;
    assert!(!targets.is_empty());
    for t in targets {
        assert_eq!(t["status"], "not measured: not in a --quick run", "{t}");
    }
    for f in ["matmul.json", "matmul.txt"] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let txt = std::fs::read_to_string(dir.join("matmul.txt"))?;
    assert!(txt.contains("halevi-shoup") && txt.contains("Targets:"));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn bad_arguments_are_refused() -> Result<(), Box<dyn std::error::Error>> {
    for args in [
        ["--dims", "65"],
        ["--dims", "0"],
        ["--word-bits", "16"],
        ["--reps", "0"],
    ] {
        let out = heloom().args(["bench", "matmul"]).args(args).output()?;
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(out.stdout.is_empty());
    }
    Ok(())
}
