//! `heloom bench serve` end to end on the smallest setting: a warm-up round and a timed
//! round on each side, every server result decrypted and checked, the idle start latencies
//! counted.

mod common;

use common::{out_dir, run_json_out};

#[test]
fn a_small_run_checks_every_result_and_reports_both_sides() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = out_dir("bench-serve-cli");
    let args = [
        "bench",
        "serve",
        "--log-n",
        "13",
        "--jobs",
        "20",
        "--rounds",
        "1",
        "--idle-jobs",
        "3",
        "--profile",
        "xeon-phi-7230f",
    ];
    let v = run_json_out(&args, &dir, "bench serve failed")?;
    let rounds = v["rounds"].as_array().ok_or("no rounds")?;
    assert_eq!(rounds.len(), 1);
    for r in rounds.iter().chain([&v["warmup"]]) {
        for k in ["schedule_jobs_per_s", "server_jobs_per_s", "ratio"] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {r}");
        }
        let shapes = r["schedule_variants"].as_object().ok_or("no shapes")?;
        assert_eq!(shapes.values().filter_map(|n| n.as_u64()).sum::<u64>(), 20);
    }
    // The server's CPU by thread: the HE lanes did the jobs' work (Linux /proc; the other
    // groups are listed, though a round this small may give them less than a clock tick).
    if cfg!(target_os = "linux") {
        let threads = rounds[0]["server_threads_ms_per_job"]
            .as_object()
            .ok_or("no thread groups")?;
        let ms = |g: &str| threads.get(g).and_then(|v| v.as_f64()).unwrap_or(0.0);
        assert!(ms("HE lanes") > 0.0, "{threads:?}");
        for g in [
            "storing results",
            "starting jobs",
            "executor scheduler",
            "HTTP",
        ] {
            assert!(threads.contains_key(g), "no {g}: {threads:?}");
            assert!(ms("HE lanes") > ms(g), "{threads:?}");
        }
    }
    // The warm-up's and the timed round's jobs, and the idle ones.
    assert_eq!(v["checked"], 43);
    assert_eq!(v["correct"], 43);
    assert_eq!(v["idle"]["jobs"], 3);
    assert!(dir.join("serve-overhead.txt").is_file());
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
