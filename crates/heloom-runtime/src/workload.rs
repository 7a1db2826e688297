//! The e^x workload with real ciphertexts: parameters, keys, encrypted inputs, the three graph
//! variants, and the check of every result.
//!
//! Client and server share a process here, as in the paper's experiment: the client side
//! (secret key, decryptor) only checks results after the run; the executor sees the evaluator
//! and the ciphertexts.

use crate::graph::{exp_coefficients, exp_graph, ExpVariant, GraphError, TaskGraph};
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Decryptor, Encryptor, Evaluator, SecurityLevel,
};
use heloom_math::Word;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Parameters of the host workload: N = 2^14, 8 RNS limbs (the paper's n_q = 8), 40-bit
/// scale, 128-bit secure.
pub fn default_params(log_n: u32) -> heloom_ckks::Result<CkksParameters> {
    CkksParameters::builder(1 << log_n)
        .levels(7)
        .first_bits(50)
        .scale_bits(40)
        .security(if log_n >= 14 {
            SecurityLevel::Bits128
        } else {
            SecurityLevel::None
        })
        .build()
}

/// Maximum error allowed on a decrypted e^x result: the slots hold x in [-1, 1], so the value
/// is at most e; CKKS noise at a 40-bit scale after 4 levels stays far below 1e-4.
pub const EXP_TOLERANCE: f64 = 1e-4;

/// Everything a real run needs.
pub struct ExpWorkload<W: Word> {
    ctx: Arc<Context<W>>,
    evaluator: Evaluator<W>,
    decryptor: Decryptor<W>,
    inputs: Vec<(Vec<f64>, Arc<Ciphertext<W>>)>,
    variants: Vec<Arc<TaskGraph>>,
}

impl<W: Word> ExpWorkload<W> {
    /// Keys, `distinct` encrypted inputs (jobs reuse them round robin; each holds random x in
    /// [-1, 1] in every slot) and the graph variants.
    pub fn new(params: CkksParameters, distinct: usize, seed: u64) -> Result<Self, GraphError> {
        let ctx = Context::<W>::new(params)?;
        let keys = keygen(&ctx, &[], false)?;
        let evaluator = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
        let encryptor = Encryptor::new(&ctx);
        let decryptor = Decryptor::new(&ctx, &keys.secret_key)?;
        let slots = ctx.n() / 2;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut inputs = Vec::with_capacity(distinct.max(1));
        for _ in 0..distinct.max(1) {
            let xs: Vec<f64> = (0..slots).map(|_| rng.gen_range(-1.0..=1.0)).collect();
            let ct = encryptor.encrypt(&xs, &keys.public_key)?;
            inputs.push((xs, Arc::new(ct)));
        }
        let (level, scale) = (inputs[0].1.level(), inputs[0].1.scale());
        let moduli = ctx.params().moduli().to_vec();
        let variants = ExpVariant::ALL
            .iter()
            .map(|&v| exp_graph(v, &moduli, level, scale).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            ctx,
            evaluator,
            decryptor,
            inputs,
            variants,
        })
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context<W>> {
        &self.ctx
    }

    /// The evaluator (one thread; tasks get their own budgets).
    pub fn evaluator(&self) -> &Evaluator<W> {
        &self.evaluator
    }

    /// Graph variants: paper's Fig. 3 first, then BSGS, then Horner.
    pub fn variants(&self) -> &[Arc<TaskGraph>] {
        &self.variants
    }

    /// Input ciphertext of job `job`.
    pub fn input(&self, job: usize) -> &Arc<Ciphertext<W>> {
        &self.inputs[job % self.inputs.len()].1
    }

    /// Largest error of a decrypted result of job `job` against the degree-6 Maclaurin
    /// polynomial of its input.
    pub fn error(&self, job: usize, out: &Ciphertext<W>) -> Result<f64, GraphError> {
        let xs = &self.inputs[job % self.inputs.len()].0;
        let got = self.decryptor.decrypt(out)?;
        let c = exp_coefficients(6);
        Ok(xs
            .iter()
            .zip(&got)
            .map(|(&x, &g)| (c.iter().rev().fold(0.0, |acc, k| acc * x + k) - g).abs())
            .fold(0.0, f64::max))
    }
}
