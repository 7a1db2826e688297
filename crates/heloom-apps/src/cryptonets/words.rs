//! 32-bit against 64-bit words on the same batch, side by side in one process: the
//! measurement behind the "32-bit words at least 1.8x faster at equal log Q" (seed 002,
//! Table 3 parameters: N = 2^14, seven 29-bit primes, scale 2^29, for both word sizes).
//!
//! Both word sizes get their keys first; then each round runs the whole batch (client
//! encryption, server inference, client decryption) once per word size, the order alternating
//! between rounds so neither always runs on a warmer or quieter machine. The fastest round of
//! each word size is reported (noise on a shared machine only ever adds time), and every
//! round's predictions are checked against the network in f64.

use std::sync::Arc;
use std::time::Instant;

use heloom_ckks::{keygen, Context, Decryptor, Evaluator, SecretKey, Threads};
use heloom_math::backend::cpu_model;
use serde::Serialize;

use super::batch::{BatchNet, BatchTimes};
use super::evaluate::{params, peak_memory, Packing};
use super::linear::LazyWord;
use super::model::{argmax, CryptoNet};
use crate::error::{AppError, Result};
use crate::mnist::{Mnist, HELD_OUT};

/// One round of one word size.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WordRound {
    /// Client: encrypting the batch.
    pub encrypt_s: f64,
    /// Server stages.
    pub stages: BatchTimes,
    /// Server total.
    pub server_s: f64,
    /// Client: decrypting the logits.
    pub decrypt_s: f64,
    /// Fraction of images whose encrypted and f64 predictions agree.
    pub agreement: f64,
}

/// All rounds of one word size and the fastest.
#[derive(Clone, Debug, Serialize)]
pub struct WordSeries {
    /// 32 or 64.
    pub word_bits: u32,
    /// log2 of Q (equal for both word sizes: the same primes).
    pub log_q: f64,
    /// Every round, in order.
    pub rounds: Vec<WordRound>,
    /// The round with the shortest server time.
    pub best: WordRound,
    /// Images per server second in the best round, with every slot of the batch used.
    pub full_batch_images_per_s: f64,
}

/// The side-by-side comparison.
#[derive(Clone, Debug, Serialize)]
pub struct WordComparison {
    /// Images in the batch (held-out test images from 5000 on).
    pub images: usize,
    /// Slots of a batch.
    pub batch_capacity: usize,
    /// Threads.
    pub threads: usize,
    /// Ring degree.
    pub n: usize,
    /// RNS limbs of the fresh ciphertexts (29-bit primes).
    pub limbs: usize,
    /// 32-bit words.
    pub u32: WordSeries,
    /// 64-bit words.
    pub u64: WordSeries,
    /// Best 64-bit server time over best 32-bit server time.
    pub server_ratio: f64,
    /// The same ratio per stage: conv, square, dense 845->100 + relin, square, dense 100->10.
    pub stage_ratios: [f64; 5],
    /// Best 64-bit over best 32-bit client encryption time.
    pub encrypt_ratio: f64,
    /// Largest resident memory of the process, bytes.
    pub peak_memory_bytes: u64,
    /// CPU model.
    pub cpu: String,
}

/// Keys, network and encrypted-side state of one word size.
struct Side<W: LazyWord> {
    net: BatchNet<W>,
    sk: SecretKey<W>,
    dec: Decryptor<W>,
    log_q: f64,
    limbs: usize,
}

impl<W: LazyWord> Side<W> {
    fn new(net: &CryptoNet, threads: Threads) -> Result<Self> {
        let p = params(W::BITS, Packing::Batch)?;
        let (log_q, limbs) = (p.log_q(), p.max_level() + 1);
        let ctx = Context::<W>::new(p)?;
        let keys = keygen(&ctx, &[], false)?;
        let ev =
            Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?.with_threads(threads);
        Ok(Self {
            net: BatchNet::new(net, &ev)?,
            dec: Decryptor::new(&ctx, &keys.secret_key)?,
            sk: keys.secret_key,
            log_q,
            limbs,
        })
    }

    fn round(&self, images: &[&[u8]], want: &[usize], threads: Threads) -> Result<WordRound> {
        let t = Instant::now();
        let cts = self.net.encrypt(images, &self.sk, threads)?;
        let encrypt_s = t.elapsed().as_secs_f64();
        let mut stages = BatchTimes::default();
        let out = self.net.infer(cts, threads, &mut stages)?;
        let t = Instant::now();
        let logits = self.net.decrypt(&out, &self.dec, images.len())?;
        let decrypt_s = t.elapsed().as_secs_f64();
        let agree = logits
            .iter()
            .zip(want)
            .filter(|(l, &w)| argmax(&l[..]) == w)
            .count();
        Ok(WordRound {
            encrypt_s,
            server_s: stages.server_s(),
            stages,
            decrypt_s,
            agreement: agree as f64 / images.len() as f64,
        })
    }
}

fn series(word_bits: u32, log_q: f64, rounds: Vec<WordRound>, capacity: usize) -> WordSeries {
    let best = rounds
        .iter()
        .min_by(|a, b| a.server_s.total_cmp(&b.server_s))
        .cloned()
        .unwrap_or_default();
    WordSeries {
        word_bits,
        log_q,
        full_batch_images_per_s: capacity as f64 / best.server_s.max(f64::MIN_POSITIVE),
        rounds,
        best,
    }
}

fn stage_array(t: &BatchTimes) -> [f64; 5] {
    [t.conv_s, t.square1_s, t.dense1_s, t.square2_s, t.dense2_s]
}

/// Runs `rounds` rounds of a batch of `images` held-out images on both word sizes;
/// `progress` hears each step.
pub fn compare_word_sizes(
    net: &CryptoNet,
    images: usize,
    rounds: usize,
    threads: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<WordComparison> {
    if rounds == 0 {
        return Err(AppError::Invalid("rounds must be at least 1".into()));
    }
    let t = Threads::new(threads.max(1));
    let mnist = Mnist::load_default_test()?;
    progress("keys (32-bit)");
    let a = Side::<u32>::new(net, t)?;
    progress("keys (64-bit)");
    let b = Side::<u64>::new(net, t)?;
    let capacity = a.net.capacity();
    if images == 0 || images > capacity.min(HELD_OUT.len()) {
        return Err(AppError::Invalid(format!(
            "images must be 1..={} (one batch of held-out test images)",
            capacity.min(HELD_OUT.len())
        )));
    }
    let ids: Vec<usize> = HELD_OUT.take(images).collect();
    let imgs: Vec<&[u8]> = ids
        .iter()
        .map(|&i| {
            mnist
                .image(i)
                .ok_or_else(|| AppError::Data(format!("no test image {i}")))
        })
        .collect::<Result<_>>()?;
    let want: Vec<usize> = imgs
        .iter()
        .map(|im| net.logits(im).map(|l| argmax(&l)))
        .collect::<Result<_>>()?;
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which word size goes first.
        for first in [r % 2 == 0, r % 2 == 1] {
            if first {
                progress(&format!("round {}/{rounds}: 32-bit words", r + 1));
                ra.push(a.round(&imgs, &want, t)?);
            } else {
                progress(&format!("round {}/{rounds}: 64-bit words", r + 1));
                rb.push(b.round(&imgs, &want, t)?);
            }
        }
    }
    let (sa, sb) = (
        series(32, a.log_q, ra, capacity),
        series(64, b.log_q, rb, capacity),
    );
    let (xa, xb) = (stage_array(&sa.best.stages), stage_array(&sb.best.stages));
    let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
    Ok(WordComparison {
        images,
        batch_capacity: capacity,
        threads: threads.max(1),
        n: 2 * capacity,
        limbs: a.limbs,
        server_ratio: ratio(sb.best.server_s, sa.best.server_s),
        stage_ratios: std::array::from_fn(|k| ratio(xb[k], xa[k])),
        encrypt_ratio: ratio(sb.best.encrypt_s, sa.best.encrypt_s),
        u32: sa,
        u64: sb,
        peak_memory_bytes: peak_memory(),
        cpu: cpu_model(),
    })
}
