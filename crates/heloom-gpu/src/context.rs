//! A CKKS context on the GPU: NTT tables, prime constants, limb layouts and base-conversion
//! constants of every level, uploaded once; device-resident ciphertexts and keys; and the
//! operations, each a short chain of kernel launches with no host round trip.

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
}

/// Splits log N into shared-memory phases, forward order (top bits first): the phase with
/// bit 0 takes up to `tile_log` bits of contiguous words; the ones above take up to
/// `tile_log - 4` bits with at least 16 consecutive words per row (coalesced loads).
pub(crate) fn phases(log_n: u32, tile_log: u32) -> Vec<Phase> {
    let base = tile_log.min(log_n);
    let up = tile_log.saturating_sub(4).max(1);
    let mut out = Vec::new();
    let mut hb = log_n;
    while hb > base {
        let lb = hb.saturating_sub(up).max(base);
        let c_log = lb.min(tile_log - (hb - lb));
        out.push(Phase { lb, hb, c_log });
        hb = lb;
    }
    out.push(Phase {
        lb: 0,
        hb: base,
        c_log: 0,
    });
    out
}

/// Number of launches a transform of 2^`log_n` takes with tiles of 2^`tile_log` words.
pub(crate) fn phase_count(log_n: u32, tile_log: u32) -> usize {
    phases(log_n, tile_log).len()
}

/// The NTT phase plan as `(lb, hb, c_log)` triples, forward order (see kernels/ntt.cu): for
/// inspection and tests.
pub fn phase_plan(log_n: u32, tile_log: u32) -> Vec<(u32, u32, u32)> {
    phases(log_n, tile_log)
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

    /// The phase plan of a transform over `rows` (polynomial, limb) rows.
    fn plan(&self, rows: u32) -> Vec<Phase> {
        phases(self.log_n, self.gpu.tile_log(self.log_n, rows))
    }

    pub(crate) fn forward(&self, f: &Fwd) -> Result<()> {
        let ph = self.plan(f.npoly * f.nl);
        let last = ph.len() - 1;
        for (i, p) in ph.iter().enumerate() {
            let spread = if i == 0 { f.spread } else { None };
            let sub = if i == last { f.subscale } else { None };
            let name = match (spread.is_some(), sub.is_some()) {
                (true, true) => "hk_ntt_fwd_spread_subscale",
                (true, false) => "hk_ntt_fwd_spread",
                (false, true) => "hk_ntt_fwd_subscale",
                (false, false) => "hk_ntt_fwd",
            };
            let input = if i == 0 { f.src } else { f.work };
            let output = if i == last { f.dst } else { f.work };
            let tile_log = p.hb - p.lb + p.c_log;
            let blocks = 1u32 << (self.log_n - tile_log);
            let threads = self.gpu.ntt_block(tile_log);
            let s = sub.unwrap_or(SubScale {
                orig: Span { addr: 0, stride: 0 },
                scal: 0,
                addend: Span { addr: 0, stride: 0 },
                addend_np: 0,
            });
            let args = [
                input.addr,
                input.stride,
                output.addr,
                output.stride,
                f.nl as u64,
                f.limb0 as u64,
                f.lp,
                self.roots.addr(0),
                self.roots_sh.addr(0),
                self.pt.addr(0),
                self.log_n as u64,
                p.lb as u64,
                p.hb as u64,
                p.c_log as u64,
                self.lazy as u64,
                spread.unwrap_or(0) as u64,
                s.orig.addr,
                s.orig.stride,
                s.scal,
                s.addend.addr,
                s.addend.stride,
                s.addend_np as u64,
                self.gpu.ntt_radix_log() as u64,
            ];
            self.gpu.launch(
                &Self::name(name),
                (blocks, f.npoly * f.nl),
                threads,
                (W::BYTES as u32) << tile_log,
                &args,
                None,
            )?;
        }
        Ok(())
    }

    /// Inverse NTT of `npoly` polynomials' limbs `limb0 .. limb0 + nl` from `src` to `dst`
    /// (may be the same).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn inverse(
        &self,
        src: Span,
        dst: Span,
        npoly: u32,
        nl: u32,
        limb0: u32,
        lp: u64,
    ) -> Result<()> {
        let mut ph = self.plan(npoly * nl);
        ph.reverse();
        for (i, p) in ph.iter().enumerate() {
            let input = if i == 0 { src } else { dst };
            let tile_log = p.hb - p.lb + p.c_log;
            let blocks = 1u32 << (self.log_n - tile_log);
            let threads = self.gpu.ntt_block(tile_log);
            let args = [
                input.addr,
                input.stride,
                dst.addr,
                dst.stride,
                nl as u64,
                limb0 as u64,
                lp,
                self.iroots.addr(0),
                self.iroots_sh.addr(0),
                self.pt.addr(0),
                self.log_n as u64,
                p.lb as u64,
                p.hb as u64,
                p.c_log as u64,
                self.lazy as u64,
                self.gpu.ntt_radix_log() as u64,
            ];
            self.gpu.launch(
                &Self::name("hk_ntt_inv"),
                (blocks, npoly * nl),
                threads,
                (W::BYTES as u32) << tile_log,
                &args,
                None,
            )?;
        }
        Ok(())
    }

    fn elt(
        &self,
        name: &str,
        out: u64,
        a: u64,
        b: u64,
        limbs: usize,
        lpp: usize,
        lp: u64,
    ) -> Result<()> {
        let count = (limbs as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out,
            a,
            b,
            limbs as u64,
            lpp as u64,
            lp,
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat(name, count, block, &args, None)
    }

    /// Launches a grid-stride kernel over `count` items with blocks of `block` threads.
    fn flat(
        &self,
        name: &str,
        count: u64,
        block: u32,
        args: &[u64],
        pack: Option<&ScalarPack>,
    ) -> Result<()> {
        let grid = (self.gpu.grid_for(count, block), 1);
        self.gpu
            .launch(&Self::name(name), grid, block, 0, args, pack)
    }

    /// A ciphertext computed from `like` (same slots and parameters) into `data`.
    fn derived(
        &self,
        like: &GpuCiphertext<W>,
        data: GpuBuffer<W>,
        size: usize,
        level: usize,
        scale: f64,
    ) -> GpuCiphertext<W> {
        GpuCiphertext {
            data: Arc::new(data),
            size,
            level,
            scale,
            slots: like.slots,
            fingerprint: like.fingerprint,
        }
    }

    fn convert(&self, c: &ConvConsts, src: Span, dst: Span, npoly: u32) -> Result<()> {
        let rows = (npoly as u64) << self.log_n;
        // Target primes per thread: enough groups of them to fill the device.
        let groups = self.gpu.conversion_groups(rows, c.m as u64);
        let grp = (c.m as u64).div_ceil(groups);
        let count = rows * (c.m as u64).div_ceil(grp);
        let block = self.gpu.block(128);
        let args = [
            src.addr,
            src.stride,
            dst.addr,
            dst.stride,
            npoly as u64,
            c.buf.addr(0),
            c.k as u64,
            c.m as u64,
            self.pt.addr(0),
            self.log_n as u64,
            grp,
        ];
        let kernel = match c.k {
            0..=8 => "hk_convert",
            9..=16 => "hk_convert_mid",
            _ => "hk_convert_wide",
        };
        self.flat(kernel, count, block, &args, None)
    }

    fn permutation(&self, g: u64) -> Result<Arc<GpuBuffer<u32>>> {
        let mut cache = self.perms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&g) {
            return Ok(Arc::clone(p));
        }
        let perm = NttPermutation::new(self.n, g)?;
        let buf = Arc::new(self.gpu.upload(perm.indices())?);
        cache.insert(g, Arc::clone(&buf));
        Ok(buf)
    }

    // ----- transfers -----

    /// Uploads a ciphertext of this context.
    pub fn upload(&self, ct: &Ciphertext<W>) -> Result<GpuCiphertext<W>> {
        if ct.fingerprint() != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "the ciphertext was made for other parameters than this GPU context".into(),
            ));
        }
        let mut words = Vec::with_capacity(ct.size() * (ct.level() + 1) * self.n);
        for p in ct.polys() {
            words.extend_from_slice(p.as_slice());
        }
        Ok(GpuCiphertext {
            data: Arc::new(self.gpu.upload(&words)?),
            size: ct.size(),
            level: ct.level(),
            scale: ct.scale(),
            slots: ct.slots(),
            fingerprint: ct.fingerprint(),
        })
    }

    /// Downloads a ciphertext (waits for the work that computes it).
    pub fn download(&self, ct: &GpuCiphertext<W>) -> Result<Ciphertext<W>> {
        let words = self.gpu.download(&ct.data)?;
        let basis = self.ctx.q_basis(ct.level)?;
        let limb_words = (ct.level + 1) * self.n;
        let polys = words
            .chunks_exact(limb_words)
            .map(|w| {
                let limbs: Vec<&[W]> = w.chunks_exact(self.n).collect();
                basis.poly_from_limbs(&limbs, Form::Ntt)
            })
            .collect::<std::result::Result<Vec<RnsPoly<W>>, _>>()?;
        Ok(self
            .ctx
            .ciphertext_from_polys(polys, ct.level, ct.scale, ct.slots)?)
    }

    /// Uploads a switching key (relinearization or Galois) of this context.
    pub fn upload_key(&self, key: &SwitchingKey<W>) -> Result<GpuSwitchingKey<W>> {
        if key.fingerprint() != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "the switching key was made for other parameters than this GPU context".into(),
            ));
        }
        let mut words = Vec::new();
        for j in 0..key.dnum() {
            let (b, a) = key
                .digit(j)
                .ok_or_else(|| GpuError::Mismatch("switching key digit missing".into()))?;
            words.extend_from_slice(b.as_slice());
            words.extend_from_slice(a.as_slice());
        }
        let expect = key.dnum() * 2 * (self.num_q + self.alpha) * self.n;
        if words.len() != expect || key.dnum() != self.ctx.params().dnum() {
            return Err(GpuError::Mismatch(
                "switching key has the wrong shape for these parameters".into(),
            ));
        }
        Ok(GpuSwitchingKey {
            data: self.gpu.upload(&words)?,
            dnum: key.dnum(),
            fingerprint: key.fingerprint(),
        })
    }

    /// Uploads `polys` polynomials over `q_0..q_level` (NTT or coefficient form alike) as one
    /// buffer, for the raw NTT entry points.
    pub fn upload_polys(&self, polys: &[&RnsPoly<W>], level: usize) -> Result<GpuBuffer<W>> {
        self.check_level(level)?;
        let basis = self.ctx.q_basis(level)?;
        let mut words = Vec::new();
        for p in polys {
            if !basis.owns(p) {
                return Err(GpuError::Mismatch(format!(
                    "polynomial is not over q_0..q_{level} of this context"
                )));
            }
            words.extend_from_slice(p.as_slice());
        }
        self.gpu.upload(&words)
    }

    fn check_polys(&self, buf: &GpuBuffer<W>, level: usize) -> Result<u32> {
        self.check_level(level)?;
        let per = (level + 1) * self.n;
        if buf.is_empty() || !buf.len().is_multiple_of(per) {
            return Err(GpuError::Mismatch(format!(
                "buffer of {} words is not a whole number of polynomials at level {level}",
                buf.len()
            )));
        }
        Ok((buf.len() / per) as u32)
    }

    /// Forward NTT, in place, of every polynomial (over `q_0..q_level`) in `buf`.
    pub fn ntt_forward(&self, buf: &mut GpuBuffer<W>, level: usize) -> Result<()> {
        let np = self.check_polys(buf, level)?;
        let s = span(buf, 0, (level + 1) * self.n);
        self.forward(&Fwd {
            src: s,
            work: s,
            dst: s,
            npoly: np,
            nl: level as u32 + 1,
            limb0: 0,
            lp: self.q_layout[level].addr(0),
            spread: None,
            subscale: None,
        })
    }

    /// Inverse NTT, in place, of every polynomial (over `q_0..q_level`) in `buf`.
    pub fn ntt_inverse(&self, buf: &mut GpuBuffer<W>, level: usize) -> Result<()> {
        let np = self.check_polys(buf, level)?;
        let s = span(buf, 0, (level + 1) * self.n);
        self.inverse(s, s, np, level as u32 + 1, 0, self.q_layout[level].addr(0))
    }

    // ----- ciphertext operations -----

    fn check_ct(&self, ct: &GpuCiphertext<W>) -> Result<()> {
        if ct.fingerprint != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "ciphertext of other parameters than this GPU context".into(),
            ));
        }
        if !ct.data.gpu().same_device(&self.gpu) {
            return Err(GpuError::Mismatch("ciphertext lives on another GPU".into()));
        }
        self.check_level(ct.level)
    }

    fn scales_match(&self, a: f64, b: f64) -> bool {
        heloom_ckks::polyops::scales_match(self.ctx.params().moduli(), a, b)
    }

    fn combine(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
        sub: bool,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        let (a, b) = if a.level == b.level && self.scales_match(a.scale, b.scale) {
            (a.clone(), b.clone())
        } else {
            self.align(a, b)?
        };
        let nl = a.level + 1;
        let pw = nl * self.n;
        let common = a.size.min(b.size);
        let size = a.size.max(b.size);
        let mut out = self.gpu.alloc::<W>(size * pw)?;
        self.elt(
            if sub { "hk_sub" } else { "hk_add" },
            out.addr(0),
            a.data.addr(0),
            b.data.addr(0),
            common * nl,
            nl,
            self.q_layout[a.level].addr(0),
        )?;
        // Polynomials only one operand has: copied (negated when subtracted).
        for p in common..size {
            if a.size > p {
                self.gpu.copy(&mut out, p * pw, &a.data, p * pw, pw)?;
            } else if sub {
                let pack = self.limb_pack(a.level, |m| (m.value() - 1) as i128)?;
                self.scalar_mul_raw(out.addr(p * pw), b.data.addr(p * pw), nl, a.level, &pack)?;
            } else {
                self.gpu.copy(&mut out, p * pw, &b.data, p * pw, pw)?;
            }
        }
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size,
            level: a.level,
            scale: a.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
        })
    }

    /// Brings two ciphertexts to one level and one scale by the CPU evaluator's rule
    /// ([`heloom_ckks::polyops::align_with`]), so results agree word for word.
    pub fn align(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<(GpuCiphertext<W>, GpuCiphertext<W>)> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        Ok(heloom_ckks::polyops::align_with(self, a, b)?)
    }

    /// Moves `ct` to `level` (below its own) with scale `target`: an integer multiple one level
    /// above, then a rescale ([`heloom_ckks::polyops::set_scale_by_rescale_with`]).
    pub fn set_scale_by_rescale(
        &self,
        ct: &GpuCiphertext<W>,
        level: usize,
        target: f64,
    ) -> Result<GpuCiphertext<W>> {
        Ok(heloom_ckks::polyops::set_scale_by_rescale_with(
            self, ct, level, target,
        )?)
    }

    /// Per-limb constants at `level`: `f(q_i)` reduced modulo `q_i`, with Shoup companions.
    fn limb_pack(&self, level: usize, f: impl Fn(&Modulus<W>) -> i128) -> Result<ScalarPack> {
        let mods = self.ctx.q_basis(level)?.moduli();
        if mods.len() > MAX_SCALAR_LIMBS {
            return Err(GpuError::Invalid(format!(
                "{} limbs; the GPU's constant kernels take at most {MAX_SCALAR_LIMBS}",
                mods.len()
            )));
        }
        let mut pack = ScalarPack { v: [0; 128] };
        for (i, m) in mods.iter().enumerate() {
            let r = f(m).rem_euclid(m.value() as i128) as u64;
            let w = W::from_u64(r);
            pack.v[2 * i] = r;
            pack.v[2 * i + 1] = m.shoup(w).to_u64();
        }
        Ok(pack)
    }

    fn scalar_mul_raw(
        &self,
        out: u64,
        input: u64,
        limbs: usize,
        level: usize,
        pack: &ScalarPack,
    ) -> Result<()> {
        let count = (limbs as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out,
            input,
            limbs as u64,
            (level + 1) as u64,
            self.q_layout[level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_scalar_mul", count, block, &args, Some(pack))
    }

    /// `ct * k` for any integer `k` (reduced modulo each prime); the scale is unchanged (the
    /// caller relabels it).
    pub fn multiply_const_exact(&self, ct: &GpuCiphertext<W>, k: i128) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let pack = self.limb_pack(ct.level, |_| k)?;
        let out = self.gpu.alloc::<W>(ct.data.len())?;
        self.scalar_mul_raw(
            out.addr(0),
            ct.data.addr(0),
            ct.size * (ct.level + 1),
            ct.level,
            &pack,
        )?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            ..ct.clone()
        })
    }

    /// `ct * k` for a small integer: exact, no level used, scale unchanged.
    pub fn multiply_int(&self, ct: &GpuCiphertext<W>, k: i64) -> Result<GpuCiphertext<W>> {
        self.multiply_const_exact(ct, k as i128)
    }

    /// `ct * c` for a real constant encoded at scale `q_level` (so that a rescale restores the
    /// scale exactly), as the CPU evaluator's `multiply_const`.
    pub fn multiply_const(&self, ct: &GpuCiphertext<W>, c: f64) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.level == 0 {
            return Err(GpuError::Ckks(heloom_ckks::CkksError::OutOfLevels(
                "multiplying by a non-integer constant needs a level to rescale; the ciphertext is at level 0".into(),
            )));
        }
        let s = self.ctx.params().moduli()[ct.level] as f64;
        let k = scaled_int(c, s)?;
        let mut out = self.multiply_const_exact(ct, k)?;
        out.scale = ct.scale * s;
        Ok(out)
    }

    /// `ct + c` in every slot (a real constant at the ciphertext's scale).
    pub fn add_const(&self, ct: &GpuCiphertext<W>, c: f64) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let k = scaled_int(c, ct.scale)?;
        let pack = self.limb_pack(ct.level, |_| k)?;
        let nl = ct.level + 1;
        let out = self.gpu.alloc::<W>(ct.data.len())?;
        let count = ((ct.size * nl) as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out.addr(0),
            ct.data.addr(0),
            (ct.size * nl) as u64,
            nl as u64,
            nl as u64,
            self.q_layout[ct.level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_scalar_add", count, block, &args, Some(&pack))?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            ..ct.clone()
        })
    }

    /// `-ct`.
    pub fn negate(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.multiply_const_exact(ct, -1)
    }

    /// `a^2` (three polynomials): the tensor product of `a` with itself, equal word for word
    /// to the CPU's squaring (`2 a0 a1 = a0 a1 + a1 a0` modulo each prime).
    pub fn square(&self, a: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.multiply(a, a)
    }

    /// The same ciphertext with its scale relabelled (no arithmetic; shares the buffer).
    pub fn with_scale(&self, ct: &GpuCiphertext<W>, scale: f64) -> Result<GpuCiphertext<W>> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(GpuError::Invalid(format!("invalid scale {scale}")));
        }
        Ok(GpuCiphertext {
            scale,
            ..ct.clone()
        })
    }

    /// `a + b`; levels and scales are aligned as the CPU evaluator aligns them.
    pub fn add(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.combine(a, b, false)
    }

    /// `a - b`; levels and scales are aligned as the CPU evaluator aligns them.
    pub fn sub(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.combine(a, b, true)
    }

    /// Drops `ct` to `level` (exact: the top limbs are discarded).
    pub fn drop_to_level(&self, ct: &GpuCiphertext<W>, level: usize) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if level > ct.level {
            return Err(GpuError::Invalid(format!(
                "cannot raise a ciphertext from level {} to {level}",
                ct.level
            )));
        }
        if level == ct.level {
            return Ok(ct.clone());
        }
        let (src_w, dst_w) = ((ct.level + 1) * self.n, (level + 1) * self.n);
        let mut out = self.gpu.alloc::<W>(ct.size * dst_w)?;
        for p in 0..ct.size {
            self.gpu
                .copy(&mut out, p * dst_w, &ct.data, p * src_w, dst_w)?;
        }
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size: ct.size,
            level,
            scale: ct.scale,
            slots: ct.slots,
            fingerprint: ct.fingerprint,
        })
    }

    /// `a * b` without relinearization: three polynomials (tensor product in one kernel).
    /// Levels are aligned by dropping, as on the CPU; the scales multiply.
    pub fn multiply(&self, a: &GpuCiphertext<W>, b: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(a)?;
        self.check_ct(b)?;
        if a.size != 2 || b.size != 2 {
            return Err(GpuError::Invalid(
                "multiply takes two-polynomial ciphertexts; relinearize first".into(),
            ));
        }
        let level = a.level.min(b.level);
        let (a, b) = (self.drop_to_level(a, level)?, self.drop_to_level(b, level)?);
        let (a, b) = (&a, &b);
        let nl = a.level + 1;
        let out = self.gpu.alloc::<W>(3 * nl * self.n)?;
        let count = (nl as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            out.addr(0),
            a.data.addr(0),
            b.data.addr(0),
            nl as u64,
            self.q_layout[a.level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_tensor", count, block, &args, None)?;
        Ok(GpuCiphertext {
            data: Arc::new(out),
            size: 3,
            level: a.level,
            scale: a.scale * b.scale,
            slots: a.slots.max(b.slots),
            fingerprint: a.fingerprint,
        })
    }

    /// Rescale (fused): the inverse NTT of the last limbs, then one forward NTT whose first
    /// phase spreads the centered last limb to every other prime on load and whose last phase
    /// subtracts and scales by `q_l^-1` on store. Bit-exact with `Evaluator::rescale`.
    pub fn rescale(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        let l = ct.level;
        if l == 0 {
            return Err(GpuError::Invalid(
                "cannot rescale at level 0: no prime left to divide by".into(),
            ));
        }
        let (n, np) = (self.n, ct.size);
        let in_stride = (l + 1) * n;
        // The last limbs in coefficient form, one per polynomial.
        let mut last = self.gpu.alloc::<W>(np * n)?;
        for p in 0..np {
            self.gpu
                .copy(&mut last, p * n, &ct.data, p * in_stride + l * n, n)?;
        }
        let ls = span(&last, 0, n);
        self.inverse(ls, ls, np as u32, 1, 0, self.single_layout[l].addr(0))?;
        let out = self.gpu.alloc::<W>(np * l * n)?;
        let phases_n = self.plan((np * l) as u32).len();
        let work = if phases_n > 1 {
            Some(self.gpu.alloc::<W>(np * l * n)?)
        } else {
            None
        };
        let dst = span(&out, 0, l * n);
        self.forward(&Fwd {
            src: ls,
            work: work.as_ref().map(|w| span(w, 0, l * n)).unwrap_or(dst),
            dst,
            npoly: np as u32,
            nl: l as u32,
            limb0: 0,
            lp: self.q_layout[l].addr(0),
            spread: Some(l as u32),
            subscale: Some(SubScale {
                orig: span(&ct.data, 0, in_stride),
                scal: self.rescale_scal[l].addr(0),
                addend: Span { addr: 0, stride: 0 },
                addend_np: 0,
            }),
        })?;
        drop(work);
        Ok(self.derived(
            ct,
            out,
            np,
            l - 1,
            ct.scale / self.ctx.params().moduli()[l] as f64,
        ))
    }

    /// Key switching of `d` (one polynomial, NTT form, `level + 1` limbs, at word offset
    /// `d_off` of `d_buf`) under `key`: returns the two polynomials `(c0, c1)` (one buffer),
    /// with `addend`'s first `addend_np` polynomials added to them. Mod-up of all digits,
    /// one NTT over every raised limb, one inner-product pass over all digits, and a mod-down
    /// whose forward NTT subtracts, scales by `P^-1` and adds on store.
    fn key_switch_raw(
        &self,
        d_buf: &GpuBuffer<W>,
        d_off: usize,
        level: usize,
        key: &GpuSwitchingKey<W>,
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        if key.fingerprint != self.ctx.fingerprint() {
            return Err(GpuError::Mismatch(
                "switching key of other parameters than this GPU context".into(),
            ));
        }
        let n = self.n;
        let nq = level + 1;
        let nqp = nq + self.alpha;
        let ndig = nq.div_ceil(self.alpha);
        // 1. The input in coefficient form (every digit's own limbs).
        let coeff = self.gpu.alloc::<W>(nq * n)?;
        let qlp = self.q_layout[level].addr(0);
        self.inverse(
            span(d_buf, d_off, nq * n),
            span(&coeff, 0, nq * n),
            1,
            nq as u32,
            0,
            qlp,
        )?;
        // 2. Mod-up: each digit raised to the other primes of Q_l P, stored compactly.
        let ext_limbs = ndig * nqp - nq;
        let ext = self.gpu.alloc::<W>(ext_limbs * n)?;
        let mut off = 0;
        for j in 0..ndig {
            let (lo, _) = self.ctx.accel().digit_primes(level, j);
            let c = &self.modup[level][j];
            self.convert(c, span(&coeff, lo * n, 0), span(&ext, off * n, 0), 1)?;
            off += c.m;
        }
        drop(coeff);
        // 3. One forward NTT over every raised limb.
        let es = span(&ext, 0, ext_limbs * n);
        self.forward(&Fwd {
            src: es,
            work: es,
            dst: es,
            npoly: 1,
            nl: ext_limbs as u32,
            limb0: 0,
            lp: self.ext_layout[level].addr(0),
            spread: None,
            subscale: None,
        })?;
        // 4. Inner product with the key, all digits per coefficient.
        let mut acc = self.gpu.alloc::<W>(2 * nqp * n)?;
        let count = (nqp as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            d_buf.addr(d_off),
            ext.addr(0),
            key.data.addr(0),
            acc.addr(0),
            nqp as u64,
            nq as u64,
            self.alpha as u64,
            ndig as u64,
            (self.num_q + self.alpha) as u64,
            self.num_q as u64,
            self.qp_layout[level].addr(0),
            self.pt.addr(0),
            self.log_n as u64,
        ];
        self.flat("hk_key_inner", count, block, &args, None)?;
        drop(ext);
        // 5. Mod-down of both halves.
        self.mod_down(&mut acc, level, addend)
    }

    /// `(x - [x]_P) / P` for two polynomials over `Q_l P` (NTT form) in `acc`; returns them over
    /// `Q_l`, plus `addend`'s first polynomials.
    fn mod_down(
        &self,
        acc: &mut GpuBuffer<W>,
        level: usize,
        addend: Option<(&GpuBuffer<W>, usize)>,
    ) -> Result<GpuBuffer<W>> {
        let n = self.n;
        let nq = level + 1;
        let nqp = nq + self.alpha;
        let qplp = self.qp_layout[level].addr(0);
        let accs = span(acc, 0, nqp * n);
        // The P limbs to coefficient form, in place.
        self.inverse(accs, accs, 2, self.alpha as u32, nq as u32, qplp)?;
        let conv = self.gpu.alloc::<W>(2 * nq * n)?;
        let cs = span(&conv, 0, nq * n);
        self.convert(&self.moddown[level], span(acc, nq * n, nqp * n), cs, 2)?;
        let out = self.gpu.alloc::<W>(2 * nq * n)?;
        let (add_span, add_np) = match addend {
            Some((b, np)) => (span(b, 0, nq * n), np as u32),
            None => (Span { addr: 0, stride: 0 }, 0),
        };
        self.forward(&Fwd {
            src: cs,
            work: cs,
            dst: span(&out, 0, nq * n),
            npoly: 2,
            nl: nq as u32,
            limb0: 0,
            lp: self.q_layout[level].addr(0),
            spread: None,
            subscale: Some(SubScale {
                orig: accs,
                scal: self.pinv_scal.addr(0),
                addend: add_span,
                addend_np: add_np,
            }),
        })?;
        Ok(out)
    }

    /// Key switching of one polynomial (for tests against `Context::key_switch`): `d` holds one
    /// NTT-form polynomial at `level`; returns `(c0, c1)` as one buffer of two polynomials.
    pub fn key_switch(
        &self,
        d: &GpuBuffer<W>,
        level: usize,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuBuffer<W>> {
        let np = self.check_polys(d, level)?;
        if np != 1 {
            return Err(GpuError::Mismatch(
                "key switching takes one polynomial".into(),
            ));
        }
        self.key_switch_raw(d, 0, level, key, None)
    }

    /// Relinearizes a three-polynomial ciphertext with the relinearization key.
    pub fn relinearize(
        &self,
        ct: &GpuCiphertext<W>,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.size != 3 {
            return Err(GpuError::Invalid(format!(
                "relinearize takes a three-polynomial ciphertext, got {}",
                ct.size
            )));
        }
        let nl = (ct.level + 1) * self.n;
        let out = self.key_switch_raw(&ct.data, 2 * nl, ct.level, key, Some((&ct.data, 2)))?;
        Ok(self.derived(ct, out, 2, ct.level, ct.scale))
    }

    /// Applies `X -> X^g` with the Galois key for `g`: permute both polynomials (NTT form),
    /// switch the permuted `c1`, add the permuted `c0` on the mod-down's store.
    pub fn apply_galois(
        &self,
        ct: &GpuCiphertext<W>,
        g: u64,
        key: &GpuSwitchingKey<W>,
    ) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if ct.size != 2 {
            return Err(GpuError::Invalid(
                "rotations take a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let perm = self.permutation(g)?;
        let nl = ct.level + 1;
        let permuted = self.gpu.alloc::<W>(2 * nl * self.n)?;
        let count = ((2 * nl) as u64) << self.log_n;
        let block = self.gpu.block(256);
        let args = [
            permuted.addr(0),
            ct.data.addr(0),
            perm.addr(0),
            (2 * nl) as u64,
            self.log_n as u64,
        ];
        self.flat("hk_permute", count, block, &args, None)?;
        let out =
            self.key_switch_raw(&permuted, nl * self.n, ct.level, key, Some((&permuted, 1)))?;
        Ok(self.derived(ct, out, 2, ct.level, ct.scale))
    }

    /// The seed-003 baseline: rescale with one thread block per polynomial, NTTs in global
    /// memory, emulated 64-bit products (64-bit words only).
    pub fn rescale_naive(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.check_ct(ct)?;
        if W::BITS != 64 {
            return Err(GpuError::Invalid(
                "the naive baseline exists for 64-bit words only".into(),
            ));
        }
        let l = ct.level;
        if l == 0 {
            return Err(GpuError::Invalid("cannot rescale at level 0".into()));
        }
        let n = self.n;
        let out = self.gpu.alloc::<W>(ct.size * l * n)?;
        let scratch = self.gpu.alloc::<W>(ct.size * 2 * n)?;
        let args = [
            ct.data.addr(0),
            out.addr(0),
            scratch.addr(0),
            (l + 1) as u64,
            self.q_layout[l].addr(0),
            self.roots.addr(0),
            self.iroots.addr(0),
            self.pt.addr(0),
            self.log_n as u64,
            self.rescale_scal[l].addr(0),
        ];
        self.gpu.launch(
            "hk_naive_rescale_u64",
            (ct.size as u32, 1),
            self.gpu.block(1024),
            0,
            &args,
            None,
        )?;
        drop(scratch);
        Ok(self.derived(
            ct,
            out,
            ct.size,
            l - 1,
            ct.scale / self.ctx.params().moduli()[l] as f64,
        ))
    }
}

/// Evaluation keys on the GPU, with the operations that need them.
pub struct GpuEvaluator<W: GpuWord> {
    ctx: Arc<GpuContext<W>>,
    relin: Option<GpuSwitchingKey<W>>,
    galois: HashMap<u64, GpuSwitchingKey<W>>,
}

impl<W: GpuWord> std::fmt::Debug for GpuEvaluator<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEvaluator")
            .field("relin", &self.relin.is_some())
            .field("galois", &self.galois.len())
            .finish()
    }
}

impl<W: GpuWord> GpuEvaluator<W> {
    /// Uploads the relinearization key and every Galois key of `keys`.
    pub fn new(ctx: &Arc<GpuContext<W>>, keys: &EvaluationKeys<W>) -> Result<Self> {
        let relin = if keys.has_relin() {
            Some(ctx.upload_key(keys.relin_key()?)?)
        } else {
            None
        };
        let mut galois = HashMap::new();
        for g in keys.galois_elements() {
            if let Some(k) = keys.galois_key(g) {
                galois.insert(g, ctx.upload_key(k)?);
            }
        }
        Ok(Self {
            ctx: Arc::clone(ctx),
            relin,
            galois,
        })
    }

    /// The GPU context.
    pub fn context(&self) -> &Arc<GpuContext<W>> {
        &self.ctx
    }

    /// Bytes of keys on the device.
    pub fn key_bytes(&self) -> usize {
        self.relin.as_ref().map_or(0, |k| k.device_bytes())
            + self
                .galois
                .values()
                .map(|k| k.device_bytes())
                .sum::<usize>()
    }

    fn relin_key(&self) -> Result<&GpuSwitchingKey<W>> {
        self.relin.as_ref().ok_or_else(|| {
            GpuError::Invalid("no relinearization key; generate the key set with one".into())
        })
    }

    /// Relinearizes a three-polynomial ciphertext.
    pub fn relinearize(&self, ct: &GpuCiphertext<W>) -> Result<GpuCiphertext<W>> {
        self.ctx.relinearize(ct, self.relin_key()?)
    }

    /// `a * b`, relinearized.
    pub fn multiply_relin(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        let key = self.relin_key()?;
        let m = self.ctx.multiply(a, b)?;
        self.ctx.relinearize(&m, key)
    }

    /// `a * b`, relinearized and rescaled.
    pub fn multiply_relin_rescale(
        &self,
        a: &GpuCiphertext<W>,
        b: &GpuCiphertext<W>,
    ) -> Result<GpuCiphertext<W>> {
        let r = self.multiply_relin(a, b)?;
        self.ctx.rescale(&r)
    }

    /// Rotates the slots left by `step` (right when negative).
    pub fn rotate(&self, ct: &GpuCiphertext<W>, step: i64) -> Result<GpuCiphertext<W>> {
        let g = galois_element_for_step(self.ctx.n(), step);
        if g == 1 {
            return self.ctx.drop_to_level(ct, ct.level);
        }
        let key = self.galois.get(&g).ok_or_else(|| {
            GpuError::Invalid(format!(
                "no Galois key for rotation step {step} (element {g}); generate keys with it"
            ))
        })?;
        self.ctx.apply_galois(ct, g, key)
    }
}
