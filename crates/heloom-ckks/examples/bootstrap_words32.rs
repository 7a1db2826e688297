//! Bootstrapping on 32-bit words (issue 19, item 4): why it stops short of 20 bits.
//!
//! A 32-bit word holds primes of at most 31 bits, and heloom's levels are one prime each, so
//! every scale inside bootstrapping is at most 2^31: EvalMod's rounding (about 2^6 per
//! coefficient with a dense secret, times `K` in the sine's variable) and the message ratio
//! leave few bits. This program bootstraps the same chain of 31-bit primes on 32-bit and on
//! 64-bit words (the words do not matter: the two agree), then the 64-bit layout of 60-bit
//! primes, and prints the precision of each over all slots of uniform complex inputs in
//! [-1, 1]. Insecure chains (`LOG_N`, default 12, Hamming weight `H`, default 32), for the
//! measurement only. Run: `cargo run --release -p heloom-ckks --example bootstrap_words32`.
use heloom_ckks::circuits::bootstrap::{BootstrapConfig, Bootstrapper};
use heloom_ckks::*;
use heloom_math::Word;
use num_complex::Complex64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Worst and mean bits of one bootstrap of uniform inputs on `bits` (`q_0` first) at `scale`.
fn precision<W: Word>(
    log_n: u32,
    h: usize,
    bits: &[u32],
    scale_bits: u32,
    special_bits: u32,
    config: BootstrapConfig,
) -> Result<(f64, f64, f64)> {
    let params = CkksParameters::builder(1 << log_n)
        .word_bits(W::BITS)
        .prime_bits(bits.to_vec())
        .scale_bits(scale_bits)
        .special_bits(special_bits)
        .security(SecurityLevel::None)
        .secret(SecretDistribution::FixedHamming(h))
        .build()?;
    let ctx = Context::<W>::new(params)?;
    let boot = Bootstrapper::new(&ctx, config, Threads::new(heloom_pool::cores()))?;
    let keys = keygen(&ctx, &boot.rotation_steps(), true)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys))?;
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let z: Vec<Complex64> = (0..ctx.n() / 2)
        .map(|_| Complex64::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect();
    let ct = Encryptor::new(&ctx).encrypt_complex(&z, &keys.public_key)?;
    let ct = ev.drop_to_level(&ct, 0)?;
    let input = worst(&dec.decrypt_complex(&ct)?, &z).0;
    let out = boot.bootstrap(&ev, &ct)?;
    let (w, m) = worst(&dec.decrypt_complex(&out)?, &z);
    Ok((input, w, m))
}

/// Worst and mean bits of `got` against `want`.
fn worst(got: &[Complex64], want: &[Complex64]) -> (f64, f64) {
    let errs: Vec<f64> = got.iter().zip(want).map(|(g, w)| (g - w).norm()).collect();
    let worst = errs.iter().copied().fold(0.0, f64::max);
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    (-worst.log2(), -mean.log2())
}

fn main() -> Result<()> {
    let log_n = env("LOG_N", 12) as u32;
    let h = env("H", 32);
    let config = BootstrapConfig::for_hamming_weight(h);
    // 31-bit primes everywhere; q_0 / Delta = 2^8 as the 64-bit presets.
    let mut narrow = vec![31];
    narrow.extend(std::iter::repeat_n(31, config.depth() + 1));
    let wide = config.chain_bits(53, &[45]);
    // The N = 2^16 preset's EvalMod on 31-bit primes: the message at q_0 / 2^4 and the arcsine.
    let mut asin = config;
    asin.arcsine_degree = 3;
    asin.message_ratio_bits = 4;
    let mut narrow_asin = vec![31];
    narrow_asin.extend(std::iter::repeat_n(31, asin.depth() + 1));
    println!(
        "N = 2^{log_n}, h = {h}, K = {}, EvalMod degree {} ({} levels), {} cores",
        config.k,
        config.degree,
        config.eval_mod_depth(),
        heloom_pool::cores()
    );
    println!("words  primes                         scale  input bits  worst bits  mean bits");
    for (words, bits, scale, special, c) in [
        (32u32, &narrow, 23u32, 31u32, config),
        (64, &narrow, 23, 31, config),
        (32, &narrow_asin, 27, 31, asin),
        (64, &wide, 45, 61, config),
    ] {
        let what = match (bits[1], c.arcsine_degree) {
            (31, 0) => "31 bits each",
            (31, _) => "31 bits each, arcsine, 2^4",
            _ => "q_0 53, 45 / 60 bits",
        };
        let r = if words == 32 {
            precision::<u32>(log_n, h, bits, scale, special, c)
        } else {
            precision::<u64>(log_n, h, bits, scale, special, c)
        };
        match r {
            Ok((input, w, m)) => {
                println!("{words:>5}  {what:<29}  2^{scale:<3}  {input:>10.1}  {w:>10.1}  {m:>9.1}")
            }
            Err(e) => println!("{words:>5}  {what:<29}  2^{scale:<3}  error: {e}"),
        }
    }
    Ok(())
}
