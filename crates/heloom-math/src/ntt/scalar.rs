//! Portable NTT: the reference that every SIMD backend must match bit for bit.

use super::NttCore;
use crate::word::Word;

/// Forward negacyclic NTT (Harvey lazy butterflies, values in [0, 4q) between layers; [0, 2q)
/// when 4q does not fit the word). Output fully reduced.
pub(crate) fn forward<W: Word>(t: &NttCore<W>, a: &mut [W]) {
    let m = &t.modulus;
    let (q, two_q) = (m.q(), m.two_q());
    let n = t.n;
    let mut gap = n >> 1;
    let mut groups = 1;
    while groups < n {
        for i in 0..groups {
            let w = t.roots[groups + i];
            let ws = t.roots_shoup[groups + i];
            let base = 2 * i * gap;
            let (lo, hi) = a[base..base + 2 * gap].split_at_mut(gap);
            if t.lazy4 {
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let mut u = *x;
                    if u >= two_q {
                        u = u.wsub(two_q);
                    }
                    let v = m.mul_shoup_lazy(*y, w, ws);
                    *x = u.wadd(v);
                    *y = u.wsub(v).wadd(two_q);
                }
            } else {
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = m.cond_sub(*x);
                    let v = m.cond_sub(m.mul_shoup_lazy(*y, w, ws));
                    *x = u.wadd(v);
                    *y = u.wsub(v).wadd(q);
                }
            }
        }
        groups <<= 1;
        gap >>= 1;
    }
    for x in a.iter_mut() {
        let mut v = *x;
        if v >= two_q {
            v = v.wsub(two_q);
        }
        *x = m.cond_sub(v);
    }
}

/// Inverse negacyclic NTT (Gentleman-Sande, values in [0, 2q) between layers), `N^-1` folded into
/// the last layer. Output fully reduced.
pub(crate) fn inverse<W: Word>(t: &NttCore<W>, a: &mut [W]) {
    let m = &t.modulus;
    let (q, two_q) = (m.q(), m.two_q());
    let n = t.n;
    let mut gap = 1;
    let mut groups = n >> 1;
    while groups > 1 {
        for i in 0..groups {
            let w = t.inv_roots[groups + i];
            let ws = t.inv_roots_shoup[groups + i];
            let base = 2 * i * gap;
            let (lo, hi) = a[base..base + 2 * gap].split_at_mut(gap);
            for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, v) = if t.lazy4 {
                    (*x, *y)
                } else {
                    (m.cond_sub(*x), m.cond_sub(*y))
                };
                let (s, d) = if t.lazy4 {
                    let mut s = u.wadd(v);
                    if s >= two_q {
                        s = s.wsub(two_q);
                    }
                    (s, u.wsub(v).wadd(two_q))
                } else {
                    (u.wadd(v), u.wsub(v).wadd(q))
                };
                *x = s;
                *y = m.mul_shoup_lazy(d, w, ws);
            }
        }
        groups >>= 1;
        gap <<= 1;
    }
    // Last layer: one group, N^-1 folded in.
    let (ni, nis) = t.n_inv;
    let (nw, nws) = t.n_inv_w;
    let (lo, hi) = a.split_at_mut(n >> 1);
    for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
        let (u, v) = (m.cond_sub(*x), m.cond_sub(*y));
        // u + v < 2q and u - v + q < 2q fit every supported word.
        let s = u.wadd(v);
        let d = u.wsub(v).wadd(q);
        *x = m.mul_shoup(s, ni, nis);
        *y = m.mul_shoup(d, nw, nws);
    }
}
