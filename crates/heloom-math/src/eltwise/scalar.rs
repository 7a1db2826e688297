//! Portable element-wise kernels: the reference for every SIMD backend.

use super::{BinOp, Job};
use crate::modulus::Modulus;
use crate::word::Word;

/// Runs `job` with the portable kernels (also the tail of every SIMD backend). Each kernel is
/// a function of its own (`inline(never)`), so that its loop is optimized alone, as it was
/// before the jobs shared one entry point.
pub(crate) fn run<W: Word>(m: &Modulus<W>, job: Job<'_, W>) {
    match job {
        Job::Binary { op, out, a, b } => binary(op, m, out, a, b),
        Job::Neg { out, a } => neg(m, out, a),
        Job::MulScalar { out, a, s } => mul_scalar(m, out, a, s),
        Job::MulAdd { acc, a, b } => mul_add(m, acc, a, b),
        Job::MulAdd2 {
            acc0,
            acc1,
            x,
            b,
            a,
        } => {
            mul_add(m, acc0, x, b);
            mul_add(m, acc1, x, a);
        }
        Job::Reduce { out, a } => reduce(m, out, a),
        Job::MulScalarAdd { acc, a, s } => mul_scalar_add(m, acc, a, s),
        Job::SubMulScalar { a, b, s } => sub_mul_scalar(m, a, b, s),
    }
}

#[inline(always)]
fn apply<W: Word>(out: &mut [W], a: Option<&[W]>, b: &[W], f: impl Fn(W, W) -> W) {
    match a {
        Some(a) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        None => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(*o, y);
            }
        }
    }
}

#[inline(always)]
fn apply_unary<W: Word>(out: &mut [W], a: Option<&[W]>, f: impl Fn(W) -> W) {
    match a {
        Some(a) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x);
            }
        }
        None => {
            for o in out.iter_mut() {
                *o = f(*o);
            }
        }
    }
}

/// `out = a op b` (or `out op= b`).
#[inline(never)]
fn binary<W: Word>(op: BinOp, m: &Modulus<W>, out: &mut [W], a: Option<&[W]>, b: &[W]) {
    match op {
        BinOp::Add => apply(out, a, b, |x, y| m.add(x, y)),
        BinOp::Sub => apply(out, a, b, |x, y| m.sub(x, y)),
        BinOp::Mul => apply(out, a, b, |x, y| m.mul(x, y)),
    }
}

/// `out = -a` (or `out = -out`).
#[inline(never)]
fn neg<W: Word>(m: &Modulus<W>, out: &mut [W], a: Option<&[W]>) {
    apply_unary(out, a, |x| m.neg(x));
}

/// `out = a * s` (or `out *= s`), Shoup with a precomputed companion of `s`.
#[inline(never)]
fn mul_scalar<W: Word>(m: &Modulus<W>, out: &mut [W], a: Option<&[W]>, s: W) {
    let ss = m.shoup(s);
    apply_unary(out, a, |x| m.mul_shoup(x, s, ss));
}

/// `out = a mod q` (or `out = out mod q`) for any words.
#[inline(never)]
fn reduce<W: Word>(m: &Modulus<W>, out: &mut [W], a: Option<&[W]>) {
    apply_unary(out, a, |x| m.reduce(x));
}

/// `acc = acc + a * b`.
#[inline(never)]
fn mul_add<W: Word>(m: &Modulus<W>, acc: &mut [W], a: &[W], b: &[W]) {
    for ((o, &x), &y) in acc.iter_mut().zip(a).zip(b) {
        *o = m.add(*o, m.mul(x, y));
    }
}

/// `x - q` if `x >= q`, else `x`, for `x < 2q`, as an unsigned minimum (compiles to a
/// conditional move, not a branch that mispredicts on random data).
#[inline(always)]
fn csub<W: Word>(x: W, q: W) -> W {
    x.min(x.wsub(q))
}

/// `acc = acc + a * s` for reduced `acc`, `s < q` and any word `a` (Shoup accepts any `x`).
#[inline(never)]
fn mul_scalar_add<W: Word>(m: &Modulus<W>, acc: &mut [W], a: &[W], s: W) {
    let ss = m.shoup(s);
    let q = m.q();
    for (o, &x) in acc.iter_mut().zip(a) {
        let p = csub(m.mul_shoup_lazy(x, s, ss), q);
        *o = csub(o.wadd(p), q);
    }
}

/// `a = (a - b) * s` for reduced `a`, `b` and `s < q`: `a + q - b` lies in `(0, 2q)`, a valid
/// Shoup input.
#[inline(never)]
fn sub_mul_scalar<W: Word>(m: &Modulus<W>, a: &mut [W], b: &[W], s: W) {
    let ss = m.shoup(s);
    let q = m.q();
    for (o, &y) in a.iter_mut().zip(b) {
        *o = csub(m.mul_shoup_lazy(o.wadd(q).wsub(y), s, ss), q);
    }
}
