//! A short, fixed sequence of GPU work for a kernel profiler (Nsight Compute): at N = 2^16 with
//! 30 64-bit limbs (the benchmark's largest set), `--warm` rounds and then one profiled round of
//! a forward NTT of every limb, an inverse NTT, a multiply and a relinearize; each op's
//! synchronized wall time per round is printed too.
//!
//! ```sh
//! cargo run --release -p heloom-gpu --example gpu_profile -- [LOG_N LIMBS]
//! ncu --launch-skip-before-match 0 --csv ... target/release/examples/gpu_profile
//! ```
//! The profiled round's kernels are the last ones launched; `HELOOM_PROFILE_WARM` (default 2)
//! sets the warm-up rounds before it.

use std::sync::Arc;
use std::time::Instant;

use heloom_ckks::{keygen, CkksParameters, Context, Encryptor, Evaluator, SecurityLevel};
use heloom_gpu::{Gpu, GpuContext, GpuEvaluator};

fn main() {
    if let Err(e) = run() {
        eprintln!("gpu_profile: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let log_n: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(16);
    let limbs: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(30);
    let warm: usize = std::env::var("HELOOM_PROFILE_WARM")
        .ok()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(2);
    let params = CkksParameters::builder(1 << log_n)
        .word_bits(64)
        .levels(limbs - 1)
        .scale_bits(40)
        .first_bits(50)
        .security(SecurityLevel::Bits128)
        .build()?;
    let ctx = Arc::new(Context::<u64>::new(params)?);
    let keys = keygen(&ctx, &[], false)?;
    let enc = Encryptor::new(&ctx);
    let vals: Vec<f64> = (0..ctx.n() / 2).map(|i| (i as f64 * 0.37).sin()).collect();
    let a = enc.encrypt(&vals, &keys.public_key)?;
    let b = enc.encrypt(&vals, &keys.public_key)?;
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let want = cpu.relinearize(&cpu.multiply(&a, &b)?)?;

    let gpu = Gpu::cuda(0)?;
    let g = GpuContext::new(&gpu, &ctx)?;
    let ge = GpuEvaluator::new(&g, &keys.evaluation_keys)?;
    let (ga, gb) = (g.upload(&a)?, g.upload(&b)?);
    let top = ctx.max_level();
    let poly = a.polys()[0].clone();
    let mut buf = g.upload_polys(&[&poly], top)?;
    println!(
        "N = 2^{log_n}, {limbs} limbs, dnum {}, alpha {} on {}",
        ctx.params().dnum(),
        ctx.params().alpha(),
        gpu.info().name
    );
    for round in 0..=warm {
        let tag = if round == warm { "profiled" } else { "warm-up" };
        let t = Instant::now();
        g.ntt_forward(&mut buf, top)?;
        gpu.synchronize()?;
        let ntt = t.elapsed();
        let t = Instant::now();
        g.ntt_inverse(&mut buf, top)?;
        gpu.synchronize()?;
        let intt = t.elapsed();
        let t = Instant::now();
        let m = g.multiply(&ga, &gb)?;
        gpu.synchronize()?;
        let mul = t.elapsed();
        let t = Instant::now();
        let r = ge.relinearize(&m)?;
        gpu.synchronize()?;
        let relin = t.elapsed();
        let got = g.download(&r)?;
        let equal = got
            .polys()
            .iter()
            .zip(want.polys())
            .all(|(x, y)| x.as_slice() == y.as_slice());
        if !equal {
            return Err("the GPU relinearization differs from the CPU's".into());
        }
        println!(
            "round {round} ({tag}): ntt {:.1} us, inverse ntt {:.1} us, multiply {:.1} us, \
             relinearize {:.1} us (wall, synchronized)",
            ntt.as_secs_f64() * 1e6,
            intt.as_secs_f64() * 1e6,
            mul.as_secs_f64() * 1e6,
            relin.as_secs_f64() * 1e6
        );
    }
    Ok(())
}
