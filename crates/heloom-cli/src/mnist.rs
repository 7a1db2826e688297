//! `heloom mnist`: CryptoNets on encrypted MNIST images (seed 002). The client encrypts a batch
//! of held-out test images, the server runs the network on the ciphertexts, the client
//! decrypts the logits; accuracy and agreement are measured against the same network in f64.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use heloom_apps::cryptonets::evaluate::{evaluate, EvalConfig, MnistReport, Packing};
use heloom_apps::cryptonets::CryptoNet;

/// Arguments of `heloom mnist`.
#[derive(Args, Debug)]
pub struct MnistArgs {
    /// Held-out test images to classify (test images 5000.., never used in training).
    #[arg(long, default_value_t = 5000)]
    pub images: usize,
    /// Ciphertext layout: batch (one image per slot) or single (one image per ciphertext).
    #[arg(long, default_value = "batch")]
    pub packing: Packing,
    /// Word size: 32 (bit-reduced words) or 64.
    #[arg(long, default_value_t = 32)]
    pub word_bits: u32,
    /// Threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// A weight file (HLCN0001 format) instead of the network trained in the repository.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    pub json: bool,
}

/// Runs `heloom mnist`.
pub fn run(args: &MnistArgs) -> Result<()> {
    let net = match &args.weights {
        Some(p) => CryptoNet::from_bytes(
            &std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        )?,
        None => CryptoNet::embedded()?,
    };
    let cfg = EvalConfig {
        images: args.images,
        packing: args.packing,
        threads: args.threads.unwrap_or_else(heloom_pool::cores),
    };
    let progress = crate::bench::progress::Progress::new(0);
    let mut say = |m: &str| progress.step(m);
    let report = match args.word_bits {
        32 => evaluate::<u32>(&net, &cfg, &mut say)?,
        64 => evaluate::<u64>(&net, &cfg, &mut say)?,
        w => bail!("--word-bits must be 32 or 64, not {w}"),
    };
    progress.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// The plain-text report.
pub fn render(r: &MnistReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "heloom mnist: CryptoNets on {} encrypted held-out MNIST images ({} packing, {}-bit words, {} threads, {})",
        r.images,
        match r.packing {
            Packing::Batch => "batch",
            Packing::Single => "single-image",
        },
        r.word_bits,
        r.threads,
        r.cpu
    );
    let _ = writeln!(
        s,
        "parameters: N = {}, {} limbs, log Q = {:.1}, scale 2^{:.1}; {} batch(es) of up to {} images",
        r.n, r.limbs, r.log_q, r.scale_bits, r.batches, r.batch_capacity
    );
    let _ = writeln!(
        s,
        "  plain accuracy       {:>8.2}%",
        100.0 * r.plain_accuracy
    );
    let _ = writeln!(
        s,
        "  encrypted accuracy   {:>8.2}%",
        100.0 * r.encrypted_accuracy
    );
    let _ = writeln!(
        s,
        "  agreement            {:>8.2}%  (max logit error {:.2e})",
        100.0 * r.agreement,
        r.max_logit_error
    );
    let _ = writeln!(
        s,
        "  server               {:>8.2} s   ({:.0} images/s; {:.2} s per batch, {:.0} images/s with full batches of {})",
        r.seconds, r.images_per_s, r.batch_latency_s, r.full_batch_images_per_s, r.batch_capacity
    );
    let st = &r.stages;
    if r.packing == Packing::Batch {
        let _ = writeln!(
            s,
            "    conv {:.2} s, square {:.2} s, dense 845->100 + relin {:.2} s, square {:.2} s, dense 100->10 {:.2} s",
            st.conv_s, st.square1_s, st.dense1_s, st.square2_s, st.dense2_s
        );
    }
    let _ = writeln!(
        s,
        "  client               encrypt {:.2} s, decrypt {:.2} s",
        r.encrypt_s, r.decrypt_s
    );
    let _ = writeln!(
        s,
        "  peak memory          {:>8.2} GiB",
        r.peak_memory_bytes as f64 / (1u64 << 30) as f64
    );
    s
}
