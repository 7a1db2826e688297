//! Kernel launches: the NTT phase plans, element-wise kernels, base conversion and
//! permutations, each a launch on the context's stream.

use super::*;

impl<W: GpuWord> GpuContext<W> {
    /// The phase plan of a transform over `rows` (polynomial, limb) rows.
    pub(super) fn plan(&self, rows: u32) -> Vec<Phase> {
        phases(self.log_n, self.gpu.ntt_tiles(self.log_n, rows))
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
            let s = sub.unwrap_or(SubScale {
                orig: Span { addr: 0, stride: 0 },
                scal: 0,
                addend: Span { addr: 0, stride: 0 },
                addend_np: 0,
            });
            let extra = [
                spread.unwrap_or(0) as u64,
                s.orig.addr,
                s.orig.stride,
                s.scal,
                s.addend.addr,
                s.addend.stride,
                s.addend_np as u64,
            ];
            let roots = (&self.roots, &self.roots_sh);
            let rows = (f.npoly, f.nl, f.limb0, f.lp);
            self.ntt_pass(name, p, (input, output), rows, roots, &extra)?;
        }
        Ok(())
    }

    /// A forward NTT in load mode "spread" into a new buffer: `src` holds one coefficient-form
    /// limb per polynomial (modulo prime `src_prime`), each spread, centred, to the `limbs.0`
    /// primes at `limbs.1` (a layout address) and transformed, with `subscale`'s epilogue when
    /// given (the rescale; ModRaise has none). `npoly` polynomials, `limbs.0` limbs each.
    pub(super) fn spread_forward(
        &self,
        src: Span,
        npoly: usize,
        limbs: (usize, u64),
        src_prime: u32,
        subscale: Option<SubScale>,
    ) -> Result<GpuBuffer<W>> {
        let (nl, lp) = limbs;
        let words = npoly * nl * self.n;
        let out = self.gpu.alloc::<W>(words)?;
        let work = if self.plan((npoly * nl) as u32).len() > 1 {
            Some(self.gpu.alloc::<W>(words)?)
        } else {
            None
        };
        let dst = span(&out, 0, nl * self.n);
        self.forward(&Fwd {
            src,
            work: work
                .as_ref()
                .map(|w| span(w, 0, nl * self.n))
                .unwrap_or(dst),
            dst,
            npoly: npoly as u32,
            nl: nl as u32,
            limb0: 0,
            lp,
            spread: Some(src_prime),
            subscale,
        })?;
        Ok(out)
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
            let roots = (&self.iroots, &self.iroots_sh);
            let rows = (npoly, nl, limb0, lp);
            self.ntt_pass("hk_ntt_inv", p, (input, dst), rows, roots, &[])?;
        }
        Ok(())
    }

    /// Launches NTT kernel `name` for the pass `p` from `io.0` to `io.1` over `rows`:
    /// `(npoly, nl, limb0, lp)`, limbs `limb0 .. limb0 + nl` of `npoly` polynomials with their
    /// primes at `lp`; `roots` are the twiddles and their Shoup companions. The arguments every
    /// NTT kernel takes, then the kernel's own `extra` ones, then the radix.
    fn ntt_pass(
        &self,
        name: &str,
        p: &Phase,
        io: (Span, Span),
        rows: (u32, u32, u32, u64),
        roots: (&GpuBuffer<W>, &GpuBuffer<W>),
        extra: &[u64],
    ) -> Result<()> {
        let (input, output) = io;
        let (npoly, nl, limb0, lp) = rows;
        let tile_log = p.hb - p.lb + p.c_log;
        let blocks = 1u32 << (self.log_n - tile_log);
        let threads = self.gpu.ntt_block(tile_log, p.threads);
        let common = [
            input.addr,
            input.stride,
            output.addr,
            output.stride,
            nl as u64,
            limb0 as u64,
            lp,
            roots.0.addr(0),
            roots.1.addr(0),
            self.pt.addr(0),
            self.log_n as u64,
            p.lb as u64,
            p.hb as u64,
            p.c_log as u64,
            self.lazy as u64,
        ];
        // No allocation per launch: every NTT kernel takes at most 32 arguments.
        let mut args = [0u64; 32];
        let n = common.len() + extra.len() + 1;
        args[..common.len()].copy_from_slice(&common);
        args[common.len()..n - 1].copy_from_slice(extra);
        args[n - 1] = self.gpu.ntt_radix_arg() as u64;
        self.gpu.launch(
            &Self::name(name),
            (blocks, npoly * nl),
            threads,
            (W::BYTES as u32) << tile_log,
            &args[..n],
            None,
        )
    }

    pub(super) fn elt(
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
    pub(super) fn flat(
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
    pub(super) fn derived(
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

    pub(super) fn convert(&self, c: &ConvConsts, src: Span, dst: Span, npoly: u32) -> Result<()> {
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

    pub(super) fn permutation(&self, g: u64) -> Result<Arc<GpuBuffer<u32>>> {
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
}
