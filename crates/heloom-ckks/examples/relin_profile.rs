//! Profiling driver: repeated relinearizations and rotations at N = 2^14.
use heloom_ckks::*;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::sync::Arc;
fn main() -> Result<()> {
    let p = CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(40)
        .build()?;
    let ctx = Context::<u64>::new(p)?;
    let keys = keygen(&ctx, &[1], false)?;
    let enc = Encryptor::new(&ctx);
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let x: Vec<f64> = (0..8192).map(|i| (i as f64 / 8192.0) - 0.5).collect();
    let a = enc.encrypt(&x, &keys.public_key)?;
    let m = ev.multiply(&a, &a)?;
    let t = std::time::Instant::now();
    let iters: usize = std::env::var("ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    for _ in 0..iters {
        std::hint::black_box(ev.relinearize(&m)?);
    }
    println!("relin {:.3} ms", t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64);
    Ok(())
}
