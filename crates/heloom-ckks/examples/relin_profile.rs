//! Profiling driver: `OP=relin|rotate|encrypt|rescale|decrypt ITERS=k` repeats one operation at
//! N = 2^14 with 8 ciphertext primes (the anchor shape), for `perf stat` / `perf record`.
use heloom_ckks::*;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::sync::Arc;
fn main() -> Result<()> {
    if std::env::var("WORD").as_deref() == Ok("32") {
        // Same log Q (~330) as the 64-bit set, on 30-bit primes.
        let p = CkksParameters::builder(1 << 14)
            .word_bits(32)
            .prime_bits(vec![30; 11])
            .scale_bits(30)
            .build()?;
        run::<u32>(p)
    } else if std::env::var("SHAPE").as_deref() == Ok("seal") {
        // SEAL's shape for the anchor: 8 ciphertext primes, one special prime (dnum = 8).
        let p = CkksParameters::builder(1 << 14)
            .prime_bits(vec![50, 48, 48, 48, 48, 48, 48, 48])
            .special_bits(50)
            .special_count(1)
            .scale_bits(48)
            .build()?;
        run::<u64>(p)
    } else {
        let p = CkksParameters::builder(1 << 14)
            .levels(7)
            .scale_bits(40)
            .build()?;
        run::<u64>(p)
    }
}

fn run<W: heloom_math::Word>(p: CkksParameters) -> Result<()> {
    println!("{p}");
    let ctx = Context::<W>::new(p)?;
    let keys = keygen(&ctx, &[1, 2, 4, 8], false)?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let x: Vec<f64> = (0..8192).map(|i| (i as f64 / 8192.0) - 0.5).collect();
    let a = enc.encrypt(&x, &keys.public_key)?;
    let m = ev.multiply(&a, &a)?;
    let op = std::env::var("OP").unwrap_or_else(|_| "relin".into());
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let t = std::time::Instant::now();
    for _ in 0..iters {
        match op.as_str() {
            "hoisted" => drop(std::hint::black_box(ev.rotate_many(&a, &[1, 2, 4, 8])?)),
            "rotate" => drop(std::hint::black_box(ev.rotate(&a, 1)?)),
            "encrypt" => drop(std::hint::black_box(enc.encrypt(&x, &keys.public_key)?)),
            "rescale" => drop(std::hint::black_box(ev.rescale(&m)?)),
            "decrypt" => drop(std::hint::black_box(dec.decrypt(&a)?)),
            "encode" => drop(std::hint::black_box(ctx.encode(&x)?)),
            _ => drop(std::hint::black_box(ev.relinearize(&m)?)),
        }
    }
    println!(
        "{op} {:.3} ms",
        t.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64
    );
    Ok(())
}
