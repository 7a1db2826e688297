//! Classifying held-out MNIST images encrypted, against the same network in f64: the job
//! behind `heloom mnist` and Python's `heloom.mnist`.

use std::sync::Arc;
use std::time::Instant;

use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Evaluator, Threads};
use heloom_math::backend::cpu_model;
use serde::Serialize;

use super::batch::{BatchNet, BatchTimes};
use super::model::{argmax, CryptoNet};
use super::single::{rotation_steps, SingleNet};
use crate::error::{AppError, Result};
use crate::mnist::{Mnist, HELD_OUT};

/// How images are laid out in ciphertexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Packing {
    /// One image per slot: 784 pixel ciphertexts classify up to N/2 images at once.
    Batch,
    /// One image per ciphertext (LoLa-style): lowest latency.
    Single,
}

impl std::str::FromStr for Packing {
    type Err = AppError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "batch" => Ok(Packing::Batch),
            "single" => Ok(Packing::Single),
            other => Err(AppError::Invalid(format!(
                "unknown packing `{other}` (available: batch, single)"
            ))),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// Held-out images to classify (from test image 5000 on).
    pub images: usize,
    /// Ciphertext layout.
    pub packing: Packing,
    /// Thread budget.
    pub threads: usize,
}

/// What one run measured.
#[derive(Debug, Serialize)]
pub struct MnistReport {
    /// Packing used.
    pub packing: Packing,
    /// Word size.
    pub word_bits: u32,
    /// Ring degree, limbs, scale.
    pub n: usize,
    /// RNS limbs of the fresh ciphertexts.
    pub limbs: usize,
    /// log2 of the scale.
    pub scale_bits: f64,
    /// log2 of Q.
    pub log_q: f64,
    /// Images classified.
    pub images: usize,
    /// Images one batch holds.
    pub batch_capacity: usize,
    /// Batches run.
    pub batches: usize,
    /// Threads.
    pub threads: usize,
    /// Accuracy of the network in f64 on these images.
    pub plain_accuracy: f64,
    /// Accuracy of the decrypted results.
    pub encrypted_accuracy: f64,
    /// Fraction of images whose encrypted and f64 predictions agree.
    pub agreement: f64,
    /// Largest difference between an encrypted and an f64 logit.
    pub max_logit_error: f64,
    /// Server seconds (all batches: from the client's ciphertexts to the encrypted logits).
    pub seconds: f64,
    /// Images per server second.
    pub images_per_s: f64,
    /// Server seconds per batch (latency of a batch).
    pub batch_latency_s: f64,
    /// Images per server second with every slot of a batch used (a batch costs the same
    /// however many of its slots hold images).
    pub full_batch_images_per_s: f64,
    /// Client seconds: encryption of all batches.
    pub encrypt_s: f64,
    /// Client seconds: decryption of all batches.
    pub decrypt_s: f64,
    /// Per-stage server seconds, summed over batches (batch packing; zero for single).
    pub stages: BatchTimes,
    /// Largest resident memory of the process, bytes (VmHWM).
    pub peak_memory_bytes: u64,
    /// CPU model.
    pub cpu: String,
}

/// Seed 002's parameters: N = 2^14, 29-bit limbs, scale 2^29, 128-bit secure; seven limbs
/// for batch packing (five levels used), eight for single-image packing (six).
pub fn params(word_bits: u32, packing: Packing) -> Result<CkksParameters> {
    let levels = match packing {
        Packing::Batch => super::batch::LEVELS + 1,
        Packing::Single => super::single::LEVELS + 1,
    };
    Ok(CkksParameters::builder(1 << 14)
        .word_bits(word_bits)
        .levels(levels)
        .scale_bits(29)
        .first_bits(29)
        .build()?)
}

/// The largest resident memory of this process so far (VmHWM), bytes; 0 where unknown.
pub fn peak_memory() -> u64 {
    heloom_pool::proc_status_bytes(None, "VmHWM").unwrap_or(0)
}

/// Classifies `cfg.images` held-out images encrypted and in f64; `progress` hears each step.
pub fn evaluate<W: super::linear::LazyWord>(
    net: &CryptoNet,
    cfg: &EvalConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<MnistReport> {
    let count = cfg.images;
    if count == 0 || count > HELD_OUT.len() {
        return Err(AppError::Invalid(format!(
            "images must be 1..={} (the held-out test images {}..{})",
            HELD_OUT.len(),
            HELD_OUT.start,
            HELD_OUT.end
        )));
    }
    let threads = cfg.threads.max(1);
    let t = Threads::new(threads);
    let mnist = Mnist::load_default_test()?;
    let p = params(W::BITS, cfg.packing)?;
    let (n, limbs, log_q, scale_bits) = (p.n(), p.max_level() + 1, p.log_q(), p.scale().log2());
    progress("keys");
    let ctx = Context::<W>::new(p)?;
    let steps = match cfg.packing {
        Packing::Batch => Vec::new(),
        Packing::Single => rotation_steps(),
    };
    let keys = keygen(&ctx, &steps, false)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?.with_threads(t);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let ids: Vec<usize> = HELD_OUT.take(count).collect();
    let image = |i: usize| {
        mnist
            .image(i)
            .ok_or_else(|| AppError::Data(format!("no test image {i}")))
    };
    let mut stages = BatchTimes::default();
    let (mut enc_s, mut dec_s, mut server_s) = (0.0, 0.0, 0.0);
    let mut logits: Vec<[f64; 10]> = Vec::with_capacity(count);
    let (batches, capacity) = match cfg.packing {
        Packing::Batch => {
            let batch = BatchNet::new(net, &ev)?;
            let batches = ids.chunks(batch.capacity()).count();
            for (b, chunk) in ids.chunks(batch.capacity()).enumerate() {
                let images: Vec<&[u8]> = chunk.iter().map(|&i| image(i)).collect::<Result<_>>()?;
                progress(&format!(
                    "batch {}/{batches}: encrypting {} images",
                    b + 1,
                    images.len()
                ));
                let s = Instant::now();
                let cts = batch.encrypt(&images, &keys.secret_key, t)?;
                enc_s += s.elapsed().as_secs_f64();
                progress(&format!("batch {}/{batches}: server", b + 1));
                let mut times = BatchTimes::default();
                let out = batch.infer(cts, t, &mut times)?;
                stages.add(&times);
                server_s += times.server_s();
                progress(&format!("batch {}/{batches}: decrypting", b + 1));
                let s = Instant::now();
                logits.extend(batch.decrypt(&out, &dec, images.len())?);
                dec_s += s.elapsed().as_secs_f64();
            }
            (batches, batch.capacity())
        }
        Packing::Single => {
            let single = SingleNet::new(net, &ev)?;
            for (k, &i) in ids.iter().enumerate() {
                if k % 10 == 0 {
                    progress(&format!("image {}/{count}", k + 1));
                }
                let s = Instant::now();
                let ct = single.encrypt(image(i)?, &keys.secret_key)?;
                enc_s += s.elapsed().as_secs_f64();
                let s = Instant::now();
                let out = single.infer(&ct)?;
                server_s += s.elapsed().as_secs_f64();
                let s = Instant::now();
                logits.push(single.decrypt(&out, &dec)?);
                dec_s += s.elapsed().as_secs_f64();
            }
            (count, 1)
        }
    };
    progress("checking against f64");
    let (mut plain_ok, mut enc_ok, mut agree, mut max_err) = (0usize, 0usize, 0usize, 0f64);
    for (&i, got) in ids.iter().zip(&logits) {
        let want = net.logits(image(i)?)?;
        let label = mnist.labels[i] as usize;
        let (pc, ec) = (argmax(&want), argmax(got));
        plain_ok += (pc == label) as usize;
        enc_ok += (ec == label) as usize;
        agree += (pc == ec) as usize;
        for k in 0..10 {
            max_err = max_err.max((got[k] - want[k]).abs());
        }
    }
    let seconds = server_s;
    let c = count as f64;
    Ok(MnistReport {
        packing: cfg.packing,
        word_bits: W::BITS,
        n,
        limbs,
        scale_bits,
        log_q,
        images: count,
        batch_capacity: capacity,
        batches,
        threads,
        plain_accuracy: plain_ok as f64 / c,
        encrypted_accuracy: enc_ok as f64 / c,
        agreement: agree as f64 / c,
        max_logit_error: max_err,
        seconds,
        images_per_s: c / seconds,
        batch_latency_s: seconds / batches as f64,
        full_batch_images_per_s: capacity as f64 * batches as f64 / seconds,
        encrypt_s: enc_s,
        decrypt_s: dec_s,
        stages,
        peak_memory_bytes: peak_memory(),
        cpu: cpu_model(),
    })
}
