//! The Shoup 64-bit kernel family (AVX2 and AVX-512 without IFMA): one [`Kernel`](super::skeleton::Kernel)
//! implementation over each instruction set's lockstep butterflies, so that the two files keep
//! only their arithmetic and their register tails.
//!
//! Lazy ranges (both instruction sets): forward values in `[0, 8q)`, inverse values in `[0, 4q)`;
//! the products of [`mul_lazy`](super::avx512_u64) are in `[0, 4q)` for any word.

/// Defines the backend's `Tables`, `forward` and `inverse`, and `Kern`, the [`Kernel`](super::skeleton::Kernel) of a Shoup 64-bit instruction set, and
/// the `forward_impl` / `inverse_impl` entry points under its target features. Expects in scope:
/// `NttCore`, `Consts` (`q`, `q2`, `q4`), `Tw`, `consts`, `tw_bcast`, `mul_lazy`, `red`, `fwd_bf`,
/// `inv_bf` (lockstep over `K` butterflies), `ld`, `st`, and the tail and head functions named.
macro_rules! kernel {
    (
        $feat:literal,
        $v:ty,
        lanes = $lanes:literal,
        tail_log = $tail_log:literal,
        max_pass = $max_pass:literal,
        tail = $tail:ident,
        head = $head:ident,
        zero = $zero:ident,
        add = $add:ident,
        sub = $sub:ident
    ) => {
        /// Backend-specific tables: none beyond the core's; the kernels read the roots and their
        /// 2^64-scaled Shoup companions directly (see `mul_lazy`).
        #[derive(Debug)]
        pub struct Tables {}

        impl Tables {
            /// Builds the tables from the core precomputation.
            pub(crate) fn new(_core: &NttCore<u64>) -> Self {
                Self {}
            }
        }

        /// Forward NTT in place.
        pub(crate) fn forward(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
            // SAFETY: tables of this backend are only built after the CPU was checked for its
            // features (`Backend::check`); `a.len() == core.n()` is checked by the caller.
            unsafe { forward_impl(core, a) }
        }

        /// Inverse NTT in place.
        pub(crate) fn inverse(core: &NttCore<u64>, _t: &Tables, a: &mut [u64]) {
            // SAFETY: as in `forward`.
            unsafe { inverse_impl(core, a) }
        }

        /// Forward transform through the shared skeleton.
        ///
        /// # Safety
        /// The features are available; `a.len() == core.n`.
        #[target_feature(enable = $feat)]
        unsafe fn forward_impl(core: &NttCore<u64>, a: &mut [u64]) {
            let k = Kern::new(core);
            // SAFETY: the features are enabled here (caller) and `a` holds the N words.
            unsafe { super::skeleton::forward(&k, a.as_mut_ptr()) }
        }

        /// Inverse transform through the shared skeleton.
        ///
        /// # Safety
        /// As [`forward_impl`].
        #[target_feature(enable = $feat)]
        unsafe fn inverse_impl(core: &NttCore<u64>, a: &mut [u64]) {
            let k = Kern::new(core);
            // SAFETY: as in `forward_impl`.
            unsafe { super::skeleton::inverse(&k, a.as_mut_ptr()) }
        }

        /// The butterflies and tail of one instruction set for one table.
        struct Kern<'a> {
            /// The table.
            core: &'a NttCore<u64>,
            /// Multiples of the modulus.
            c: Consts,
            /// `N^-1` (last inverse layer, sum branch).
            ni: Tw,
            /// `N^-1 psi^-bitrev(1)` (last inverse layer, difference branch).
            nw: Tw,
        }

        impl<'a> Kern<'a> {
            /// Broadcasts the constants of `core`.
            #[inline]
            #[target_feature(enable = $feat)]
            fn new(core: &'a NttCore<u64>) -> Self {
                Self {
                    core,
                    c: consts(core),
                    ni: tw_bcast(core.n_inv.0, core.n_inv.1),
                    nw: tw_bcast(core.n_inv_w.0, core.n_inv_w.1),
                }
            }
        }

        impl Kernel for Kern<'_> {
            type W = u64;
            type V = $v;
            type Tw = Tw;
            const LANES: usize = $lanes;
            const TAIL_LOG: u32 = $tail_log;
            const BLOCK_LOG: u32 = 11;
            const MAX_PASS: u32 = $max_pass;
            const WIDE: bool = true;

            super::skeleton::plumbing!($feat, u64, $v, zero = $zero, load = ld, store = st);

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tw(&self, idx: usize) -> Tw {
                tw_bcast(self.core.roots[idx], self.core.roots_shoup[idx])
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_tw(&self, idx: usize) -> Tw {
                tw_bcast(self.core.inv_roots[idx], self.core.inv_roots_shoup[idx])
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_bfs<const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                _first: bool,
            ) -> ([$v; M], [$v; M]) {
                let out = fwd_bf(x, y, t, self.c);
                for i in 0..M {
                    [x[i], y[i]] = out[i];
                }
                (x, y)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_bfs<const M: usize>(
                &self,
                mut x: [$v; M],
                mut y: [$v; M],
                t: [Tw; M],
                top: bool,
            ) -> ([$v; M], [$v; M]) {
                if !top {
                    let out = inv_bf(x, y, t, self.c);
                    for i in 0..M {
                        [x[i], y[i]] = out[i];
                    }
                    return (x, y);
                }
                // The last layer: inputs in [0, 4q), so the sum and the shifted difference stay below
                // 8q, and the products of any word are in [0, 4q).
                let c = self.c;
                let (mut s, mut d) = (x, y);
                for i in 0..M {
                    s[i] = $add(x[i], y[i]);
                    d[i] = $sub($add(x[i], c.q4), y[i]);
                }
                let (ps, pd) = (mul_lazy(s, [self.ni; M], c), mul_lazy(d, [self.nw; M], c));
                for i in 0..M {
                    x[i] = red(red(ps[i], c.q2), c.q);
                    y[i] = red(red(pd[i], c.q2), c.q);
                }
                (x, y)
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn fwd_tail(&self, a: *mut u64, base: usize, len: usize) {
                // SAFETY: forwarded from the caller (features, bounds, multiples of 2^TAIL_LOG).
                unsafe { $tail(self.core, a, base, len) }
            }

            #[inline]
            #[target_feature(enable = $feat)]
            unsafe fn inv_head(&self, a: *mut u64, base: usize, len: usize) {
                // SAFETY: as in `fwd_tail`.
                unsafe { $head(self.core, a, base, len) }
            }
        }
    };
}

pub(crate) use kernel;
