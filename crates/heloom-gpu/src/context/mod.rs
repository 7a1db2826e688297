//! A CKKS context on the GPU: NTT tables, prime constants, limb layouts and base-conversion
//! constants of every level, uploaded once; device-resident ciphertexts and keys; and the
//! operations, each a short chain of kernel launches with no host round trip.

mod bootstrap;
mod launch;
mod ops;
mod transfer;

pub use bootstrap::{GpuBootstrapper, GpuPlaintext};
pub use ops::GpuEvaluator;

use crate::error::{GpuError, Result};
use crate::gpu::{Gpu, GpuBuffer, ScalarPack, MAX_SCALAR_LIMBS};
use crate::word::GpuWord;
use heloom_ckks::{Ciphertext, Context, EvaluationKeys, SwitchingKey};
use heloom_math::automorphism::{galois_element_for_step, NttPermutation};
use heloom_math::{Form, Modulus, RnsPoly, Word};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// `round(c * scale)` as an exact integer (the CPU evaluator's rule, with its bound).
fn scaled_int(c: f64, scale: f64) -> Result<i128> {
    let v = (c * scale).round();
    if !v.is_finite() || v.abs() >= 2f64.powi(120) {
        return Err(GpuError::Ckks(heloom_ckks::CkksError::InvalidInput(
            format!(
                "constant {c} at scale 2^{:.1} does not fit (|c * scale| must be below 2^120)",
                scale.log2()
            ),
        )));
    }
    Ok(v as i128)
}

/// Base-conversion constants on the device (layout in kernels/rns.cu).
struct ConvConsts {
    buf: GpuBuffer<u64>,
    k: usize,
    m: usize,
}

/// One NTT launch's bit range (see kernels/ntt.cu).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    pub lb: u32,
    pub hb: u32,
    pub c_log: u32,
    /// Most threads per block.
    pub threads: u32,
}

/// The tiles of one transform's phases (see [`phases`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tiles {
    /// log2 of the largest tile of the phase with bit 0 (contiguous words).
    pub base: u32,
    /// log2 of the largest tile of each phase above it.
    pub upper: u32,
    /// log2 of the fewest consecutive words a row of an upper phase's tile has (coalescing).
    pub run: u32,
    /// Most threads per block.
    pub threads: u32,
}

impl Tiles {
    /// Tiles of 2^`tile_log` words in every phase, rows of at least 16 words above bit 0.
    pub(crate) fn uniform(tile_log: u32) -> Self {
        Self {
            base: tile_log,
            upper: tile_log,
            run: 4,
            threads: crate::gpu::DEFAULT_NTT_THREADS,
        }
    }
}

/// Splits log N into shared-memory phases, forward order (top bits first): the phase with
/// bit 0 takes up to `t.base` bits of contiguous words; the ones above take up to
/// `t.upper - t.run` bits with at least 2^`t.run` consecutive words per row (coalesced loads).
pub(crate) fn phases(log_n: u32, t: Tiles) -> Vec<Phase> {
    let base = t.base.min(log_n);
    let up = t.upper.saturating_sub(t.run).max(1);
    let mut out = Vec::new();
    let mut hb = log_n;
    while hb > base {
        let lb = hb.saturating_sub(up).max(base);
        let c_log = lb.min(t.upper.saturating_sub(hb - lb));
        out.push(Phase {
            lb,
            hb,
            c_log,
            threads: t.threads,
        });
        hb = lb;
    }
    out.push(Phase {
        lb: 0,
        hb: base,
        c_log: 0,
        threads: t.threads,
    });
    out
}

/// Number of launches a transform of 2^`log_n` takes with tiles of 2^`tile_log` words.
pub(crate) fn phase_count(log_n: u32, tile_log: u32) -> usize {
    phases(log_n, Tiles::uniform(tile_log)).len()
}

/// The NTT phase plan as `(lb, hb, c_log)` triples, forward order (see kernels/ntt.cu), for
/// tiles of at most 2^`base` words in the phase with bit 0, 2^`upper` above it, and rows of at
/// least 2^`run` consecutive words there: for inspection and tests.
pub fn phase_plan(log_n: u32, base: u32, upper: u32, run: u32) -> Vec<(u32, u32, u32)> {
    phases(
        log_n,
        Tiles {
            base,
            upper,
            run,
            threads: crate::gpu::DEFAULT_NTT_THREADS,
        },
    )
    .into_iter()
    .map(|p| (p.lb, p.hb, p.c_log))
    .collect()
}

/// A device address and the word stride between polynomials.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub addr: u64,
    pub stride: u64,
}

fn span<W: GpuWord>(b: &GpuBuffer<W>, off: usize, stride: usize) -> Span {
    Span {
        addr: b.addr(off),
        stride: stride as u64,
    }
}

/// The sub-scale epilogue of a forward NTT: out = (orig - x) * s_k (+ addend for the first
/// `addend_np` polynomials).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SubScale {
    pub orig: Span,
    pub scal: u64,
    pub addend: Span,
    pub addend_np: u32,
}

/// A forward NTT over `npoly` polynomials' limbs `limb0 .. limb0 + nl`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fwd {
    pub src: Span,
    pub work: Span,
    pub dst: Span,
    pub npoly: u32,
    pub nl: u32,
    pub limb0: u32,
    pub lp: u64,
    /// Load mode 1: every limb's input is `src` (one limb per polynomial) modulo this prime.
    pub spread: Option<u32>,
    pub subscale: Option<SubScale>,
}

/// A ciphertext on the GPU: `size` polynomials of `level + 1` limbs (NTT form), contiguous.
/// Operations never modify their inputs, so clones share the device buffer.
#[derive(Clone)]
pub struct GpuCiphertext<W: GpuWord> {
    pub(crate) data: Arc<GpuBuffer<W>>,
    pub(crate) size: usize,
    pub(crate) level: usize,
    pub(crate) scale: f64,
    pub(crate) slots: usize,
    pub(crate) fingerprint: u64,
}

impl<W: GpuWord> std::fmt::Debug for GpuCiphertext<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuCiphertext")
            .field("size", &self.size)
            .field("level", &self.level)
            .field("scale", &self.scale)
            .finish()
    }
}

impl<W: GpuWord> GpuCiphertext<W> {
    /// Level.
    pub fn level(&self) -> usize {
        self.level
    }
    /// Scale of the encrypted values.
    pub fn scale(&self) -> f64 {
        self.scale
    }
    /// Number of polynomials (2, or 3 after a multiply).
    pub fn size(&self) -> usize {
        self.size
    }
    /// Slots in use.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// Bytes on the device.
    pub fn device_bytes(&self) -> usize {
        self.data.len() * W::BYTES
    }
}

/// A switching key on the GPU: `[b_0, a_0, b_1, a_1, ...]` over `Q_L P`.
pub struct GpuSwitchingKey<W: GpuWord> {
    pub(crate) data: GpuBuffer<W>,
    pub(crate) dnum: usize,
    pub(crate) fingerprint: u64,
}

impl<W: GpuWord> std::fmt::Debug for GpuSwitchingKey<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuSwitchingKey(dnum {})", self.dnum)
    }
}

impl<W: GpuWord> GpuSwitchingKey<W> {
    /// Bytes on the device.
    pub fn device_bytes(&self) -> usize {
        self.data.len() * W::BYTES
    }
}

/// A CKKS context bound to a GPU.
pub struct GpuContext<W: GpuWord> {
    gpu: Gpu,
    ctx: Arc<Context<W>>,
    n: usize,
    log_n: u32,
    lazy: bool,
    num_q: usize,
    alpha: usize,
    pt: GpuBuffer<W>,
    roots: GpuBuffer<W>,
    roots_sh: GpuBuffer<W>,
    iroots: GpuBuffer<W>,
    iroots_sh: GpuBuffer<W>,
    q_layout: Vec<GpuBuffer<u32>>,
    qp_layout: Vec<GpuBuffer<u32>>,
    ext_layout: Vec<GpuBuffer<u32>>,
    /// `[l]`: the one limb of prime q_l (rescale's last limb).
    single_layout: Vec<GpuBuffer<u32>>,
    modup: Vec<Vec<ConvConsts>>,
    moddown: Vec<ConvConsts>,
    rescale_scal: Vec<GpuBuffer<W>>,
    pinv_scal: GpuBuffer<W>,
    /// `[l]` (`l >= 1`): the merged mod-down and rescale's conversion from `q_l` and `P` to
    /// `q_0 .. q_(l-1)` and its scale `(q_l P)^-1` (pairs); `None` at level 0.
    moddown_rs: Vec<Option<(ConvConsts, GpuBuffer<W>)>>,
    /// `P mod q_i`.
    p_mod_q: Vec<u64>,
    perms: Mutex<HashMap<u64, Arc<GpuBuffer<u32>>>>,
}

impl<W: GpuWord> std::fmt::Debug for GpuContext<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("gpu", &self.gpu.info().name)
            .field("n", &self.n)
            .field("levels", &self.num_q)
            .finish()
    }
}

fn scal_pairs<W: Word>(m: &[Modulus<W>], s: impl Iterator<Item = u64>) -> Vec<W> {
    let mut out = Vec::new();
    for (mi, v) in m.iter().zip(s) {
        let w = mi.reduce_u64(v);
        out.push(w);
        out.push(mi.shoup(w));
    }
    out
}

impl<W: GpuWord> GpuContext<W> {
    /// Uploads everything the kernels need for `ctx` to `gpu`.
    pub fn new(gpu: &Gpu, ctx: &Arc<Context<W>>) -> Result<Arc<Self>> {
        let n = ctx.n();
        let log_n = n.trailing_zeros();
        let full = ctx.full_basis();
        let tables = full.ntt_tables();
        let mods = full.moduli();
        let num_q = ctx.max_level() + 1;
        let alpha = ctx.params().alpha();
        let total = mods.len();
        if total != num_q + alpha {
            return Err(GpuError::Mismatch(
                "context basis is not q_0..q_L followed by the special primes".into(),
            ));
        }
        let mut pt = vec![W::ZERO; total * 8];
        let mut roots = Vec::with_capacity(total * n);
        let mut roots_sh = Vec::with_capacity(total * n);
        let mut iroots = Vec::with_capacity(total * n);
        let mut iroots_sh = Vec::with_capacity(total * n);
        for (i, t) in tables.iter().enumerate() {
            let core = t.core();
            let m = core.modulus();
            let (r0, r1) = m.barrett_ratio();
            let (ni, nis) = core.n_inv();
            let (nw, nws) = core.n_inv_w();
            pt[i * 8..i * 8 + 7].copy_from_slice(&[m.q(), r0, r1, ni, nis, nw, nws]);
            roots.extend_from_slice(core.roots());
            roots_sh.extend_from_slice(core.roots_shoup());
            iroots.extend_from_slice(core.inv_roots());
            iroots_sh.extend_from_slice(core.inv_roots_shoup());
        }
        let lazy = mods.iter().all(|m| m.bits() + 2 <= W::BITS);
        let p_idx: Vec<u32> = (num_q..total).map(|i| i as u32).collect();
        let mut q_layout = Vec::with_capacity(num_q);
        let mut qp_layout = Vec::with_capacity(num_q);
        let mut ext_layout = Vec::with_capacity(num_q);
        let mut single_layout = Vec::with_capacity(num_q);
        let mut modup = Vec::with_capacity(num_q);
        let mut moddown = Vec::with_capacity(num_q);
        let mut rescale_scal = Vec::with_capacity(num_q);
        let mut moddown_rs = Vec::with_capacity(num_q);
        for l in 0..num_q {
            let q: Vec<u32> = (0..=l as u32).collect();
            let qp: Vec<u32> = q.iter().copied().chain(p_idx.iter().copied()).collect();
            let digits = (l + 1).div_ceil(alpha);
            let mut ext = Vec::new();
            let mut per = Vec::with_capacity(digits);
            for j in 0..digits {
                let (lo, hi) = ctx.accel().digit_primes(l, j);
                let to: Vec<u32> = qp
                    .iter()
                    .copied()
                    .filter(|&x| (x as usize) < lo || (x as usize) >= hi)
                    .collect();
                let from: Vec<u32> = (lo as u32..hi as u32).collect();
                per.push(Self::conv(
                    gpu,
                    ctx.accel().modup_converter(l, j)?,
                    &from,
                    &to,
                )?);
                ext.extend(to);
            }
            modup.push(per);
            moddown.push(Self::conv(
                gpu,
                ctx.accel().moddown_converter(l)?,
                &p_idx,
                &q,
            )?);
            let inv = (0..l)
                .map(|i| ctx.accel().rescale_inv_mod(l, i))
                .collect::<std::result::Result<Vec<u64>, _>>()?;
            let scal = scal_pairs(&mods[..l], inv.into_iter());
            let scal = if l == 0 { vec![W::ZERO; 2] } else { scal };
            rescale_scal.push(gpu.upload(&scal)?);
            moddown_rs.push(if l == 0 {
                None
            } else {
                let from: Vec<u32> = std::iter::once(l as u32)
                    .chain(p_idx.iter().copied())
                    .collect();
                let conv = Self::conv(
                    gpu,
                    ctx.accel().moddown_rescale_converter(l)?,
                    &from,
                    &q[..l],
                )?;
                let inv = (0..l)
                    .map(|i| ctx.accel().moddown_rescale_inv_mod(l, i))
                    .collect::<std::result::Result<Vec<u64>, _>>()?;
                Some((conv, gpu.upload(&scal_pairs(&mods[..l], inv.into_iter()))?))
            });
            q_layout.push(gpu.upload(&q)?);
            qp_layout.push(gpu.upload(&qp)?);
            ext_layout.push(gpu.upload(&ext)?);
            single_layout.push(gpu.upload(&[l as u32])?);
        }
        let pinv: Vec<u64> = (0..num_q)
            .map(|i| ctx.accel().p_inv_mod(i))
            .collect::<std::result::Result<_, _>>()?;
        let pinv_scal = scal_pairs(&mods[..num_q], pinv.into_iter());
        Ok(Arc::new(Self {
            gpu: gpu.clone(),
            ctx: Arc::clone(ctx),
            n,
            log_n,
            lazy,
            num_q,
            alpha,
            pt: gpu.upload(&pt)?,
            roots: gpu.upload(&roots)?,
            roots_sh: gpu.upload(&roots_sh)?,
            iroots: gpu.upload(&iroots)?,
            iroots_sh: gpu.upload(&iroots_sh)?,
            q_layout,
            qp_layout,
            ext_layout,
            single_layout,
            modup,
            moddown,
            rescale_scal,
            pinv_scal: gpu.upload(&pinv_scal)?,
            moddown_rs,
            p_mod_q: (0..num_q)
                .map(|i| ctx.accel().p_mod_q(i))
                .collect::<std::result::Result<_, _>>()?,
            perms: Mutex::new(HashMap::new()),
        }))
    }

    fn conv(
        gpu: &Gpu,
        c: &heloom_math::BasisConverter<W>,
        from: &[u32],
        to: &[u32],
    ) -> Result<ConvConsts> {
        let (k, m) = (from.len(), to.len());
        if c.from_len() != k || c.to_len() != m {
            return Err(GpuError::Mismatch(
                "base converter does not match the limb layout".into(),
            ));
        }
        if k > 64 {
            return Err(GpuError::Invalid(format!(
                "base conversion from {k} primes; the GPU kernels support at most 64 (use more dnum)"
            )));
        }
        let mut v: Vec<u64> = Vec::with_capacity(2 * k + 2 * m + m * k);
        v.extend(from.iter().map(|&x| x as u64));
        v.extend(to.iter().map(|&x| x as u64));
        v.extend_from_slice(c.qhat_inv());
        v.extend_from_slice(c.qhat_mod_p());
        v.extend_from_slice(c.neg_q_mod_p());
        v.extend(c.inv_q().iter().map(|x| x.to_bits()));
        Ok(ConvConsts {
            buf: gpu.upload(&v)?,
            k,
            m,
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The CPU context these tables were built from.
    pub fn context(&self) -> &Arc<Context<W>> {
        &self.ctx
    }

    /// Ring degree.
    pub fn n(&self) -> usize {
        self.n
    }

    fn name(base: &str) -> String {
        format!("{base}{}", W::SUFFIX)
    }

    fn check_level(&self, level: usize) -> Result<()> {
        if level >= self.num_q {
            return Err(GpuError::Invalid(format!(
                "level {level} does not exist (levels 0..={})",
                self.num_q - 1
            )));
        }
        Ok(())
    }

    // ----- kernels -----
}
