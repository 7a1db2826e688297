//! Every NTT launch shape on one GPU, side by side in one process: for each tile of the phase
//! with bit 0, tile of the phases above it, row length and block size ([`NttShape`]), the
//! forward and inverse NTT of every limb, a rescale and a relinearize, each the best of 3
//! rounds of calls back to back (>= 3 ms a round). Every shape's outputs are checked equal to
//! the default shape's (NTT) and the CPU's (rescale, relinearize) before it is timed.
//!
//! ```sh
//! cargo run --release -p heloom-gpu --example ntt_sweep -- [--quick] [OUT.json]
//! ```
//! Prints a table per parameter set (N = 2^16 x 30 limbs, 2^15 x 15, 2^14 x 8, 64-bit words)
//! and the best shapes; writes every row as JSON when given a path.

use std::sync::Arc;
use std::time::Instant;

use heloom_ckks::{keygen, CkksParameters, Context, Encryptor, Evaluator, SecurityLevel};
use heloom_gpu::{Gpu, GpuContext, GpuEvaluator, NttShape};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("ntt_sweep: {e}");
        std::process::exit(1);
    }
}

/// Best of `rounds` rounds of per-call time (us), each round calling `f` until >= `min_us`.
fn best_us(rounds: usize, min_us: f64, gpu: &Gpu, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    f()?;
    gpu.synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = Instant::now();
        let mut calls = 0u32;
        loop {
            f()?;
            calls += 1;
            if calls.is_multiple_of(4) {
                gpu.synchronize()?;
                if t.elapsed().as_secs_f64() * 1e6 >= min_us {
                    break;
                }
            }
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(calls));
    }
    Ok(best)
}

fn shapes() -> Vec<NttShape> {
    let mut out = vec![NttShape::default()];
    for tile in [10u32, 11, 12, 13] {
        for upper in [9u32, 10, 11, 12, 13] {
            for run in [3u32, 4, 5] {
                for threads in [128u32, 256, 512] {
                    let s = NttShape {
                        tile_log: Some(tile),
                        upper_tile_log: Some(upper),
                        run_log: run,
                        threads: Some(threads),
                    };
                    if upper > run + 4 && s != out[0] {
                        out.push(s);
                    }
                }
            }
        }
    }
    out
}

fn label(s: &NttShape) -> String {
    let t = |v: Option<u32>| v.map_or("auto".to_string(), |v| v.to_string());
    format!(
        "{},{},{} x{}",
        t(s.tile_log),
        t(s.upper_tile_log),
        s.run_log,
        s.threads.map_or("auto".to_string(), |t| t.to_string())
    )
}

fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `--emulator`: a smoke test of this program on the host emulator (small ring, few shapes).
    let emulated = args.iter().any(|a| a == "--emulator");
    let json_out = args.iter().find(|a| !a.starts_with("--")).cloned();
    let gpu = if emulated {
        Gpu::emulator()
    } else {
        Gpu::cuda(0)?
    };
    let sets: &[(u32, usize)] = if emulated {
        &[(11, 3)]
    } else {
        &[(16, 30), (15, 15), (14, 8)]
    };
    // `--quick`: the default against the shapes it was chosen from (issue 21's first sweep).
    let quick = args.iter().any(|a| a == "--quick");
    let shapes: Vec<NttShape> = if emulated {
        shapes().into_iter().step_by(40).collect()
    } else if quick {
        let fixed = |t, u, r, th| NttShape {
            tile_log: Some(t),
            upper_tile_log: u,
            run_log: r,
            threads: Some(th),
        };
        vec![
            NttShape::default(),
            fixed(12, None, 4, 256),
            fixed(10, Some(10), 4, 128),
            fixed(10, Some(10), 3, 128),
        ]
    } else {
        shapes()
    };
    println!(
        "ntt_sweep on {} ({} SMs)",
        gpu.info().name,
        gpu.info().multiprocessors
    );
    let mut rows = Vec::new();
    for &(log_n, limbs) in sets {
        let t0 = Instant::now();
        let params = CkksParameters::builder(1 << log_n)
            .word_bits(64)
            .levels(limbs - 1)
            .scale_bits(40)
            .first_bits(50)
            .security(if emulated {
                SecurityLevel::None
            } else {
                SecurityLevel::Bits128
            })
            .build()?;
        let ctx = Arc::new(Context::<u64>::new(params)?);
        let keys = keygen(&ctx, &[], false)?;
        let enc = Encryptor::new(&ctx);
        let vals: Vec<f64> = (0..ctx.n() / 2).map(|i| (i as f64 * 0.37).sin()).collect();
        let a = enc.encrypt(&vals, &keys.public_key)?;
        let b = enc.encrypt(&vals, &keys.public_key)?;
        let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
        let ab = cpu.multiply(&a, &b)?;
        let want_relin = cpu.relinearize(&ab)?;
        let want_rescale = cpu.rescale(&a)?;
        let g = GpuContext::new(&gpu, &ctx)?;
        let ge = GpuEvaluator::new(&g, &keys.evaluation_keys)?;
        let (ga, gab) = (g.upload(&a)?, g.upload(&ab)?);
        let top = ctx.max_level();
        let poly = a.polys()[0].clone();
        gpu.set_ntt_shape(NttShape::default())?;
        let mut buf = g.upload_polys(&[&poly], top)?;
        g.ntt_forward(&mut buf, top)?;
        let want_ntt = gpu.download(&buf)?;
        println!(
            "\nN = 2^{log_n}, {limbs} limbs (set-up {:.1} s): shape = base tile, upper tile, \
             row (log2) x threads",
            t0.elapsed().as_secs_f64()
        );
        println!(
            "{:<18} {:>9} {:>9} {:>9} {:>9}",
            "shape", "ntt us", "intt us", "rescale", "relin us"
        );
        for &s in &shapes {
            gpu.set_ntt_shape(s)?;
            // Correctness first: this shape's words against the default's and the CPU's.
            let mut buf = g.upload_polys(&[&poly], top)?;
            g.ntt_forward(&mut buf, top)?;
            if gpu.download(&buf)? != want_ntt {
                return Err(format!("shape {} changed the NTT's words", label(&s)).into());
            }
            let same = |x: &heloom_ckks::Ciphertext<u64>, y: &heloom_ckks::Ciphertext<u64>| {
                x.polys()
                    .iter()
                    .zip(y.polys())
                    .all(|(p, q)| p.as_slice() == q.as_slice())
            };
            if !same(&g.download(&ge.relinearize(&gab)?)?, &want_relin)
                || !same(&g.download(&g.rescale(&ga)?)?, &want_rescale)
            {
                return Err(format!("shape {} differs from the CPU", label(&s)).into());
            }
            let ntt = best_us(3, 3_000.0, &gpu, || Ok(g.ntt_forward(&mut buf, top)?))?;
            let intt = best_us(3, 3_000.0, &gpu, || Ok(g.ntt_inverse(&mut buf, top)?))?;
            let rescale = best_us(3, 3_000.0, &gpu, || {
                g.rescale(&ga)?;
                Ok(())
            })?;
            let relin = best_us(3, 3_000.0, &gpu, || {
                ge.relinearize(&gab)?;
                Ok(())
            })?;
            println!(
                "{:<18} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                label(&s),
                ntt,
                intt,
                rescale,
                relin
            );
            rows.push(serde_json::json!({
                "log_n": log_n, "limbs": limbs, "tile_log": s.tile_log,
                "upper_tile_log": s.upper_tile_log, "run_log": s.run_log, "threads": s.threads,
                "ntt_us": ntt, "intt_us": intt, "rescale_us": rescale, "relin_us": relin,
            }));
        }
    }
    gpu.set_ntt_shape(NttShape::default())?;
    // The best shapes per set and measure, and the one best over every set's relinearize.
    println!("\nbest shapes");
    for &(log_n, limbs) in sets {
        let set: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["log_n"] == log_n && r["limbs"] == limbs)
            .collect();
        for key in ["ntt_us", "intt_us", "rescale_us", "relin_us"] {
            let v = |r: &serde_json::Value| r[key].as_f64().unwrap_or(f64::INFINITY);
            if let (Some(best), Some(default)) =
                (set.iter().min_by(|a, b| v(a).total_cmp(&v(b))), set.first())
            {
                println!(
                    "  2^{log_n} x {limbs} {key:<11} {:>8.1} us (default {:>8.1}) at {}",
                    v(best),
                    v(default),
                    serde_json::to_string(&[
                        &best["tile_log"],
                        &best["upper_tile_log"],
                        &best["run_log"],
                        &best["threads"]
                    ])?
                );
            }
        }
    }
    if let Some(path) = json_out {
        std::fs::write(&path, serde_json::to_string_pretty(&rows)?)?;
        println!("rows written to {path}");
    }
    Ok(())
}
