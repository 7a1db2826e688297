//! Times one full batch of encrypted CryptoNets inference (N = 2^14, seven 29-bit limbs):
//! `cargo run --release -p heloom-apps --example batch_probe -- 32|64 [images]`.

use heloom_apps::cryptonets::batch::{BatchNet, BatchTimes};
use heloom_apps::cryptonets::linear::LazyWord;
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::mnist::Mnist;
use heloom_ckks::{keygen, CkksParameters, Context, Evaluator, Threads};
use std::sync::Arc;

fn run<W: LazyWord>(word: u32, count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let p = CkksParameters::builder(1 << 14)
        .word_bits(word)
        .levels(6)
        .scale_bits(29)
        .first_bits(30)
        .build()?;
    let ctx = Context::<W>::new(p)?;
    let keys = keygen(&ctx, &[], false)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let batch = BatchNet::new(&CryptoNet::random(11), &ev)?;
    let mnist = Mnist::load_default_test()?;
    let images: Vec<&[u8]> = (0..count)
        .filter_map(|i| mnist.image(i % mnist.len()))
        .collect();
    let t = Threads::new(heloom_pool::cores());
    let start = std::time::Instant::now();
    let cts = batch.encrypt(&images, &keys.secret_key, t)?;
    let enc = start.elapsed().as_secs_f64();
    let mut times = BatchTimes::default();
    batch.infer(&cts, t, &mut times)?;
    println!(
        "u{word}: encrypt {enc:.2}s, {times:?}, server {:.2}s -> {:.0} images/s",
        times.server_s(),
        count as f64 / times.server_s()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let word: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let count: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(8192);
    if word == 32 {
        run::<u32>(32, count)
    } else {
        run::<u64>(64, count)
    }
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
