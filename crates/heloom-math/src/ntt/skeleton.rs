//! The one memory skeleton of every SIMD NTT: pass planning, blocking and the broadcast-twiddle
//! passes, shared by all instruction sets and word sizes. An instruction set supplies only its
//! butterflies and its register-resident tail ([`Kernel`]); NEON and SVE add an implementation,
//! not a copy (HEXL's IFMA and AVX-512DQ NTTs are one template the same way).
//!
//! Layer `k` has gap `2^k` (forward: `k = log N - 1` down to 0; inverse: up again). The group of
//! layer `k` starting at word `s` uses root `(N >> (k+1)) + (s >> (k+1))` of the bit-reversed
//! tables (Longa-Naehrig 2016, Alg. 1 and 2).
//!
//! - Layers whose groups are larger than one L1-sized block run over the whole array
//!   (breadth first); the rest run block by block while the block sits in L1 (depth first).
//! - Layers with gaps of at least `2^TAIL_LOG` run as radix-2^R memory passes (R <= 3 layers per
//!   load and store of every word), twiddles broadcast. With [`Kernel::WIDE`] each step keeps
//!   up to eight registers of data in flight: `8 >> R` adjacent vector columns where the gap
//!   allows, so that every layer hands the kernel several independent butterflies at once (each
//!   alone is one long dependency chain).
//! - The layers with smaller gaps run inside registers, in the kernel's tail (forward, with the
//!   final reduction to `[0, q)`) and head (inverse).
//! - The inverse folds `N^-1` into its last layer.
//!
//! Every function here is `#[inline(always)]`: it is compiled inside its instruction set's
//! `#[target_feature]` code, where the kernel's butterflies then inline. The drivers inline into
//! the entry points; each pass is compiled as a function of its own through
//! [`Kernel::fwd_pass`] / [`Kernel::inv_pass`] (one function holding every pass spills
//! twiddles, 5-10% slower at N = 2^16).

/// One instruction set's NTT kernel for one modulus and ring degree.
///
/// The methods are `unsafe` because they are compiled for CPU features the caller must have;
/// a value of an implementing type is only made inside its `#[target_feature]` entry point, after
/// the backend was checked on this CPU.
pub(crate) trait Kernel {
    /// Machine word (`u32` or `u64`).
    type W;
    /// One vector register.
    type V: Copy;
    /// A twiddle factor broadcast to every lane, in the form the butterflies want.
    type Tw: Copy;
    /// Words per register.
    const LANES: usize;
    /// Layers done in registers by [`Kernel::tail`] (gaps `2^(TAIL_LOG-1)` down to 1);
    /// broadcast passes need gaps of at least `2^TAIL_LOG >= LANES`.
    const TAIL_LOG: u32;
    /// log2 of the depth-first block in words (16 KiB: half of an L1 data cache).
    const BLOCK_LOG: u32;
    /// Most layers fused into one broadcast pass (3 where the register file holds eight data
    /// registers and seven twiddles, 2 where a twiddle takes four registers).
    const MAX_PASS: u32;
    /// Whether passes of fewer than three layers fill eight registers with adjacent vector
    /// columns (more independent butterflies per layer), or load one column.
    const WIDE: bool;

    /// log2 of the ring degree.
    fn log_n(&self) -> u32;

    /// The zero register.
    ///
    /// # Safety
    /// The kernel's CPU features are available.
    unsafe fn zero(&self) -> Self::V;

    /// Unaligned load of `LANES` words.
    ///
    /// # Safety
    /// CPU features as [`Kernel::zero`]; `p..p+LANES` readable.
    unsafe fn load(&self, p: *const Self::W) -> Self::V;

    /// Unaligned store of `LANES` words.
    ///
    /// # Safety
    /// CPU features as [`Kernel::zero`]; `p..p+LANES` writable.
    unsafe fn store(&self, p: *mut Self::W, v: Self::V);

    /// Forward (`FWD`) or inverse root `idx` (bit-reversed table) broadcast.
    ///
    /// # Safety
    /// CPU features as [`Kernel::zero`]; `idx < N`.
    unsafe fn tw<const FWD: bool>(&self, idx: usize) -> Self::Tw;

    /// `M` independent butterflies in the kernel's lazy ranges. Forward (`FWD`, Cooley-Tukey):
    /// `(x, y) -> (x + w y, x - w y)`; `edge`: the inputs are reduced (the transform's first
    /// layer). Inverse (Gentleman-Sande): `(x, y) -> (x + y, (x - y) w)`; `edge`: the
    /// transform's last layer, `N^-1` folded in (the twiddles `t` are then unused) and the
    /// outputs fully reduced.
    ///
    /// # Safety
    /// CPU features as [`Kernel::zero`].
    unsafe fn bfs<const FWD: bool, const M: usize>(
        &self,
        x: [Self::V; M],
        y: [Self::V; M],
        t: [Self::Tw; M],
        edge: bool,
    ) -> ([Self::V; M], [Self::V; M]);

    /// One forward pass, [`fwd_pass`] compiled for this kernel's features as a function of its
    /// own (each pass then gets the whole register file: one function holding every pass
    /// spills).
    ///
    /// # Safety
    /// As [`fwd_pass`].
    unsafe fn fwd_pass<const R: usize, const C: usize, const FIRST: bool>(
        &self,
        a: *mut Self::W,
        base: usize,
        len: usize,
        k_hi: u32,
    );

    /// One inverse pass, [`inv_pass`] compiled as [`Kernel::fwd_pass`].
    ///
    /// # Safety
    /// As [`inv_pass`].
    unsafe fn inv_pass<const R: usize, const C: usize, const TOP: bool>(
        &self,
        a: *mut Self::W,
        base: usize,
        len: usize,
        k_lo: u32,
    );

    /// The layers with gaps below `2^TAIL_LOG` on `a[base..base+len]`, in registers: the last
    /// forward ones (`FWD`, outputs fully reduced) or the first inverse ones (with `N^-1` folded
    /// in where `N = 2^TAIL_LOG`).
    ///
    /// # Safety
    /// CPU features as [`Kernel::zero`]; `a` holds the transform's `N` words, `base + len <= N`,
    /// both multiples of `2^TAIL_LOG`.
    unsafe fn tail<const FWD: bool>(&self, a: *mut Self::W, base: usize, len: usize);
}

/// The [`Kernel`] methods that are the same for every instruction set but must be compiled under
/// its features: `log_n` (from a `core: &NttCore` field), `zero`, `load`, `store`, and the two
/// pass wrappers that give each pass a function of its own; with `shoup_tw`, also `tw` from the
/// core's roots and Shoup companions (`Self::Tw::splat(w, s)`). Used inside `impl Kernel for`.
macro_rules! plumbing {
    ($feat:expr, $w:ty, $v:ty, zero = $zero:expr, load = $ld:expr, store = $st:expr, shoup_tw) => {
        $crate::ntt::skeleton::plumbing!($feat, $w, $v, zero = $zero, load = $ld, store = $st);

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn tw<const FWD: bool>(&self, idx: usize) -> Self::Tw {
            let c = self.core;
            let (w, s) = if FWD {
                (c.roots[idx], c.roots_shoup[idx])
            } else {
                (c.inv_roots[idx], c.inv_roots_shoup[idx])
            };
            // SAFETY: the features are enabled here.
            unsafe { Self::Tw::splat(w, s) }
        }
    };
    ($feat:expr, $w:ty, $v:ty, zero = $zero:expr, load = $ld:expr, store = $st:expr) => {
        fn log_n(&self) -> u32 {
            self.core.log_n
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn zero(&self) -> $v {
            // SAFETY: the features are enabled here.
            unsafe { $zero() }
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn load(&self, p: *const $w) -> $v {
            // SAFETY: the caller guarantees LANES readable words.
            unsafe { $ld(p) }
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn store(&self, p: *mut $w, v: $v) {
            // SAFETY: the caller guarantees LANES writable words.
            unsafe { $st(p, v) }
        }

        #[target_feature(enable = $feat)]
        unsafe fn fwd_pass<const R: usize, const C: usize, const FIRST: bool>(
            &self,
            a: *mut $w,
            base: usize,
            len: usize,
            k_hi: u32,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe {
                $crate::ntt::skeleton::fwd_pass::<Self, R, C, FIRST>(self, a, base, len, k_hi)
            }
        }

        #[target_feature(enable = $feat)]
        unsafe fn inv_pass<const R: usize, const C: usize, const TOP: bool>(
            &self,
            a: *mut $w,
            base: usize,
            len: usize,
            k_lo: u32,
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { $crate::ntt::skeleton::inv_pass::<Self, R, C, TOP>(self, a, base, len, k_lo) }
        }
    };
}

pub(crate) use plumbing;

/// How many of `left` layers the next broadcast pass fuses, at most `max`: three where possible,
/// but 2 + 2 rather than 3 + 1.
#[inline(always)]
fn pass_size(left: u32, max: u32) -> u32 {
    match (left, max) {
        (_, 0..=2) => left.min(max.max(1)),
        (0..=3, _) => left,
        (4, _) => 2,
        _ => 3,
    }
}

/// Forward transform of the `N` words at `a`.
///
/// # Safety
/// The kernel's CPU features are available; `a` holds `N` words.
#[inline(always)]
pub(crate) unsafe fn forward<K: Kernel>(k: &K, a: *mut K::W) {
    let log_n = k.log_n();
    let n = 1usize << log_n;
    let block_log = log_n.min(K::BLOCK_LOG);
    let block = 1usize << block_log;
    // SAFETY: (both calls and the loop) forwarded from the caller; every range is `a`'s or one
    // block of it, and the layers stop at the kernel's tail.
    unsafe {
        fwd_layers(k, a, 0, n, log_n - 1, block_log);
        for base in (0..n).step_by(block) {
            fwd_layers(k, a, base, block, block_log - 1, K::TAIL_LOG);
            k.tail::<true>(a, base, block);
        }
    }
}

/// Inverse transform of the `N` words at `a`, `N^-1` included.
///
/// # Safety
/// As [`forward`].
#[inline(always)]
pub(crate) unsafe fn inverse<K: Kernel>(k: &K, a: *mut K::W) {
    let log_n = k.log_n();
    let n = 1usize << log_n;
    let block_log = log_n.min(K::BLOCK_LOG);
    let block = 1usize << block_log;
    // SAFETY: as in `forward`.
    unsafe {
        for base in (0..n).step_by(block) {
            k.tail::<false>(a, base, block);
            inv_layers(k, a, base, block, K::TAIL_LOG, block_log);
        }
        inv_layers(k, a, 0, n, block_log, log_n);
    }
}

/// Forward layers `k_hi` down to `k_lo` on `a[base..base+len]` in fused passes.
///
/// # Safety
/// As [`forward`]; `base` and `len` multiples of `2^(k_hi+1)`, `k_lo >= TAIL_LOG`.
#[inline(always)]
unsafe fn fwd_layers<K: Kernel>(
    k: &K,
    a: *mut K::W,
    base: usize,
    len: usize,
    k_hi: u32,
    k_lo: u32,
) {
    if k_hi < k_lo {
        return;
    }
    let top = k.log_n() - 1;
    let mut kh = k_hi;
    let mut left = k_hi + 1 - k_lo;
    while left > 0 {
        let r = pass_size(left, K::MAX_PASS);
        let gap = 1usize << (kh + 1 - r);
        let first = kh == top;
        // SAFETY: forwarded; the pass's smallest gap is at least 2^TAIL_LOG >= LANES.
        unsafe {
            match (r, cols::<K>(r, gap), first) {
                (3, _, false) => k.fwd_pass::<3, 1, false>(a, base, len, kh),
                (3, _, true) => k.fwd_pass::<3, 1, true>(a, base, len, kh),
                (2, 2, false) => k.fwd_pass::<2, 2, false>(a, base, len, kh),
                (2, 2, true) => k.fwd_pass::<2, 2, true>(a, base, len, kh),
                (2, _, false) => k.fwd_pass::<2, 1, false>(a, base, len, kh),
                (2, _, true) => k.fwd_pass::<2, 1, true>(a, base, len, kh),
                (_, 4, false) => k.fwd_pass::<1, 4, false>(a, base, len, kh),
                (_, 4, true) => k.fwd_pass::<1, 4, true>(a, base, len, kh),
                (_, 2, false) => k.fwd_pass::<1, 2, false>(a, base, len, kh),
                (_, 2, true) => k.fwd_pass::<1, 2, true>(a, base, len, kh),
                (_, _, false) => k.fwd_pass::<1, 1, false>(a, base, len, kh),
                (_, _, true) => k.fwd_pass::<1, 1, true>(a, base, len, kh),
            }
        }
        kh = kh.wrapping_sub(r);
        left -= r;
    }
}

/// Inverse layers `k_lo` up to `k_end - 1` on `a[base..base+len]` in fused passes; the layer
/// `log N - 1`, if among them, gets `N^-1` folded in.
///
/// # Safety
/// As [`forward`]; `base` and `len` multiples of `2^k_end`, `k_lo >= TAIL_LOG`.
#[inline(always)]
unsafe fn inv_layers<K: Kernel>(
    k: &K,
    a: *mut K::W,
    base: usize,
    len: usize,
    k_lo: u32,
    k_end: u32,
) {
    let mut kl = k_lo;
    while kl < k_end {
        let r = pass_size(k_end - kl, K::MAX_PASS);
        let gap = 1usize << kl;
        let top = kl + r == k.log_n();
        // SAFETY: forwarded; the pass's smallest gap 2^kl is at least 2^TAIL_LOG >= LANES.
        unsafe {
            match (r, cols::<K>(r, gap), top) {
                (3, _, false) => k.inv_pass::<3, 1, false>(a, base, len, kl),
                (3, _, true) => k.inv_pass::<3, 1, true>(a, base, len, kl),
                (2, 2, false) => k.inv_pass::<2, 2, false>(a, base, len, kl),
                (2, 2, true) => k.inv_pass::<2, 2, true>(a, base, len, kl),
                (2, _, false) => k.inv_pass::<2, 1, false>(a, base, len, kl),
                (2, _, true) => k.inv_pass::<2, 1, true>(a, base, len, kl),
                (_, 4, false) => k.inv_pass::<1, 4, false>(a, base, len, kl),
                (_, 4, true) => k.inv_pass::<1, 4, true>(a, base, len, kl),
                (_, 2, false) => k.inv_pass::<1, 2, false>(a, base, len, kl),
                (_, 2, true) => k.inv_pass::<1, 2, true>(a, base, len, kl),
                (_, _, false) => k.inv_pass::<1, 1, false>(a, base, len, kl),
                (_, _, true) => k.inv_pass::<1, 1, true>(a, base, len, kl),
            }
        }
        kl += r;
    }
}

/// Adjacent vector columns per step of a radix-2^r pass whose smallest gap is `gap`: enough to
/// fill eight registers, as far as the gap holds them.
#[inline(always)]
fn cols<K: Kernel>(r: u32, gap: usize) -> usize {
    if !K::WIDE {
        return 1;
    }
    let mut c = 8usize >> r;
    while c > 1 && c * K::LANES > gap {
        c /= 2;
    }
    c
}

/// One radix-2^R forward pass: layers `k_hi` down to `k_hi - R + 1` on `a[base..base+len]`,
/// `C` vector columns per step (`S = 2^R C` registers of data: 8, 4 or 2); `FIRST`: `k_hi` is
/// the transform's first layer.
///
/// Register `i` holds row `i / C`, column `i % C`. Layer `d` pairs rows `2^(R-1-d)` apart, that
/// is registers `S >> (d+1)` apart: the pass runs the first `R` layers of the `S`-register
/// network, and its twiddles are the first `2^R - 1` of that network's.
///
/// # Safety
/// As [`fwd_layers`]; the smallest gap `2^(k_hi-R+1)` is at least `C * LANES`.
#[inline(always)]
pub(crate) unsafe fn fwd_pass<K: Kernel, const R: usize, const C: usize, const FIRST: bool>(
    k: &K,
    a: *mut K::W,
    base: usize,
    len: usize,
    k_hi: u32,
) {
    let n = 1usize << k.log_n();
    let gap = 1usize << (k_hi + 1 - R as u32);
    let span = gap << R;
    let s_regs = (1 << R) * C;
    debug_assert!(gap >= C * K::LANES && base.is_multiple_of(span) && len.is_multiple_of(span));
    // SAFETY: the kernel's features are available (caller); every index below is a root of a
    // group of this pass (below N), and every access lies in a span of `a[base..base+len]`:
    // j + (C - 1) LANES + (2^R - 1) gap + LANES <= s + span.
    unsafe {
        for s in (base..base + len).step_by(span) {
            // Layer d of the pass uses the 2^d roots from (n >> (kd+1)) + (s >> (kd+1)).
            let t0 = k.tw::<true>((n >> (k_hi + 1)) + (s >> (k_hi + 1)));
            let mut tw = [t0; 7];
            for d in 1..R {
                let kd = k_hi - d as u32;
                for t in 0..(1usize << d) {
                    tw[(1 << d) - 1 + t] = k.tw::<true>((n >> (kd + 1)) + (s >> (kd + 1)) + t);
                }
            }
            for j in (s..s + gap).step_by(C * K::LANES) {
                let at = |i: usize| j + (i / C) * gap + (i % C) * K::LANES;
                let mut x = [k.zero(); 8];
                for (i, xi) in x.iter_mut().enumerate().take(s_regs) {
                    *xi = k.load(a.add(at(i)));
                }
                match s_regs {
                    8 => fwd_net8::<K, R, FIRST>(k, &mut x, &tw),
                    4 => fwd_net4::<K, R, FIRST>(k, &mut x, &tw),
                    _ => {
                        let ([x0], [x1]) = k.bfs::<true, _>([x[0]], [x[1]], [tw[0]], FIRST);
                        (x[0], x[1]) = (x0, x1);
                    }
                }
                for (i, xi) in x.iter().enumerate().take(s_regs) {
                    k.store(a.add(at(i)), *xi);
                }
            }
        }
    }
}

/// The first `R` layers of the eight-register forward network (distances 4, 2, 1), four
/// butterflies per layer in lockstep.
///
/// # Safety
/// The kernel's CPU features are available.
#[inline(always)]
unsafe fn fwd_net8<K: Kernel, const R: usize, const FIRST: bool>(
    k: &K,
    x: &mut [K::V; 8],
    t: &[K::Tw; 7],
) {
    let [x0, x1, x2, x3, x4, x5, x6, x7] = *x;
    // SAFETY: forwarded from the caller.
    unsafe {
        let ([x0, x1, x2, x3], [x4, x5, x6, x7]) =
            k.bfs::<true, _>([x0, x1, x2, x3], [x4, x5, x6, x7], [t[0]; 4], FIRST);
        if R == 1 {
            *x = [x0, x1, x2, x3, x4, x5, x6, x7];
            return;
        }
        let ([x0, x1, x4, x5], [x2, x3, x6, x7]) = k.bfs::<true, _>(
            [x0, x1, x4, x5],
            [x2, x3, x6, x7],
            [t[1], t[1], t[2], t[2]],
            false,
        );
        if R == 2 {
            *x = [x0, x1, x2, x3, x4, x5, x6, x7];
            return;
        }
        let ([x0, x2, x4, x6], [x1, x3, x5, x7]) = k.bfs::<true, _>(
            [x0, x2, x4, x6],
            [x1, x3, x5, x7],
            [t[3], t[4], t[5], t[6]],
            false,
        );
        *x = [x0, x1, x2, x3, x4, x5, x6, x7];
    }
}

/// The first `R` layers of the four-register forward network (distances 2, 1) on `x[0..4]`.
///
/// # Safety
/// The kernel's CPU features are available.
#[inline(always)]
unsafe fn fwd_net4<K: Kernel, const R: usize, const FIRST: bool>(
    k: &K,
    x: &mut [K::V; 8],
    t: &[K::Tw; 7],
) {
    let [x0, x1, x2, x3, ..] = *x;
    // SAFETY: forwarded from the caller.
    unsafe {
        let ([x0, x1], [x2, x3]) = k.bfs::<true, _>([x0, x1], [x2, x3], [t[0]; 2], FIRST);
        let (x0, x1, x2, x3) = if R == 2 {
            let ([x0, x2], [x1, x3]) = k.bfs::<true, _>([x0, x2], [x1, x3], [t[1], t[2]], false);
            (x0, x1, x2, x3)
        } else {
            (x0, x1, x2, x3)
        };
        (x[0], x[1], x[2], x[3]) = (x0, x1, x2, x3);
    }
}

/// One radix-2^R inverse pass: layers `k_lo` up to `k_lo + R - 1` on `a[base..base+len]`, `C`
/// columns per step (`S = 2^R C` registers); `TOP`: the last of them is the transform's last
/// layer.
///
/// Layer `d` pairs rows `2^d` apart, registers `C 2^d` apart: the pass runs the last `R` layers
/// of the `S`-register network (distances 1, 2, 4); its twiddles are stored layer after layer.
///
/// # Safety
/// As [`inv_layers`]; the gap `2^k_lo` is at least `C * LANES`.
#[inline(always)]
pub(crate) unsafe fn inv_pass<K: Kernel, const R: usize, const C: usize, const TOP: bool>(
    k: &K,
    a: *mut K::W,
    base: usize,
    len: usize,
    k_lo: u32,
) {
    let n = 1usize << k.log_n();
    let gap = 1usize << k_lo;
    let span = gap << R;
    let s_regs = (1 << R) * C;
    debug_assert!(gap >= C * K::LANES && base.is_multiple_of(span) && len.is_multiple_of(span));
    // SAFETY: as in `fwd_pass`.
    unsafe {
        for s in (base..base + len).step_by(span) {
            // Layer d (gap 2^(k_lo+d)) uses 2^(R-1-d) roots; the top layer uses N^-1 instead.
            let t0 = k.tw::<false>((n >> (k_lo + 1)) + (s >> (k_lo + 1)));
            let mut tw = [t0; 7];
            let mut next = 0;
            for d in 0..R {
                let kd = k_lo + d as u32;
                for t in 0..(1usize << (R - 1 - d)) {
                    if !(TOP && d == R - 1) {
                        tw[next] = k.tw::<false>((n >> (kd + 1)) + (s >> (kd + 1)) + t);
                    }
                    next += 1;
                }
            }
            for j in (s..s + gap).step_by(C * K::LANES) {
                let at = |i: usize| j + (i / C) * gap + (i % C) * K::LANES;
                let mut x = [k.zero(); 8];
                for (i, xi) in x.iter_mut().enumerate().take(s_regs) {
                    *xi = k.load(a.add(at(i)));
                }
                match s_regs {
                    8 => inv_net8::<K, R, TOP>(k, &mut x, &tw),
                    4 => inv_net4::<K, R, TOP>(k, &mut x, &tw),
                    _ => {
                        let ([x0], [x1]) = k.bfs::<false, _>([x[0]], [x[1]], [tw[0]], TOP);
                        (x[0], x[1]) = (x0, x1);
                    }
                }
                for (i, xi) in x.iter().enumerate().take(s_regs) {
                    k.store(a.add(at(i)), *xi);
                }
            }
        }
    }
}

/// The last `R` layers of the eight-register inverse network (distances 1, 2, 4), four
/// butterflies per layer in lockstep; `TOP`: the distance-4 layer is the transform's last.
///
/// # Safety
/// The kernel's CPU features are available.
#[inline(always)]
unsafe fn inv_net8<K: Kernel, const R: usize, const TOP: bool>(
    k: &K,
    x: &mut [K::V; 8],
    t: &[K::Tw; 7],
) {
    let [x0, x1, x2, x3, x4, x5, x6, x7] = *x;
    // SAFETY: forwarded from the caller.
    unsafe {
        let (x0, x1, x2, x3, x4, x5, x6, x7) = if R == 3 {
            let ([x0, x2, x4, x6], [x1, x3, x5, x7]) = k.bfs::<false, _>(
                [x0, x2, x4, x6],
                [x1, x3, x5, x7],
                [t[0], t[1], t[2], t[3]],
                false,
            );
            (x0, x1, x2, x3, x4, x5, x6, x7)
        } else {
            (x0, x1, x2, x3, x4, x5, x6, x7)
        };
        // The distance-2 layer's twiddles follow the distance-1 layer's (none when R < 3).
        let t2 = if R == 3 { 4 } else { 0 };
        let (x0, x1, x2, x3, x4, x5, x6, x7) = if R >= 2 {
            let ([x0, x1, x4, x5], [x2, x3, x6, x7]) = k.bfs::<false, _>(
                [x0, x1, x4, x5],
                [x2, x3, x6, x7],
                [t[t2], t[t2], t[t2 + 1], t[t2 + 1]],
                false,
            );
            (x0, x1, x2, x3, x4, x5, x6, x7)
        } else {
            (x0, x1, x2, x3, x4, x5, x6, x7)
        };
        let t4 = (1 << R) - 2;
        let ([x0, x1, x2, x3], [x4, x5, x6, x7]) =
            k.bfs::<false, _>([x0, x1, x2, x3], [x4, x5, x6, x7], [t[t4]; 4], TOP);
        *x = [x0, x1, x2, x3, x4, x5, x6, x7];
    }
}

/// The last `R` layers of the four-register inverse network (distances 1, 2) on `x[0..4]`.
///
/// # Safety
/// The kernel's CPU features are available.
#[inline(always)]
unsafe fn inv_net4<K: Kernel, const R: usize, const TOP: bool>(
    k: &K,
    x: &mut [K::V; 8],
    t: &[K::Tw; 7],
) {
    let [x0, x1, x2, x3, ..] = *x;
    // SAFETY: forwarded from the caller.
    unsafe {
        let (x0, x1, x2, x3) = if R == 2 {
            let ([x0, x2], [x1, x3]) = k.bfs::<false, _>([x0, x2], [x1, x3], [t[0], t[1]], false);
            (x0, x1, x2, x3)
        } else {
            (x0, x1, x2, x3)
        };
        let t2 = (1 << R) - 2;
        let ([x0, x1], [x2, x3]) = k.bfs::<false, _>([x0, x1], [x2, x3], [t[t2]; 2], TOP);
        (x[0], x[1], x[2], x[3]) = (x0, x1, x2, x3);
    }
}
