//! The one loop skeleton of every SIMD element-wise backend: the split of a [`Job`] into whole
//! vectors and a portable tail, the loops, in-place operands, the fallback to the portable
//! kernels for moduli a backend does not take, and the fused key-switching step. An instruction
//! set provides a [`Lanes`]: its per-modulus constants and the arithmetic on one vector (HEXL
//! keeps one template per kernel family the same way). The 32- and 64-bit Barrett families
//! (`barrett32`, `barrett64`) are `Lanes` over a handful of instructions, so AVX2, AVX-512 and
//! the coming NEON / SVE ports write only those.
//!
//! [`vector`] is `#[inline(always)]` and runs inside the backend's `#[target_feature]` driver
//! (made by [`backend`]), where the arithmetic then inlines.

use super::{scalar, BinOp, Job};
use crate::modulus::Modulus;
use crate::word::Word;

/// One instruction set's element-wise arithmetic for one modulus: the constants (`Self`) and
/// the operation on one vector of [`Lanes::LANES`] words. Input and output ranges are those
/// of [`super::Eltwise`]: reduced in, reduced out, except where an operation says otherwise.
///
/// # Safety
/// The `unsafe fn`s need the implementor's CPU features; a value of an implementing type is
/// only made inside the backend's `#[target_feature]` function (see [`backend`]), which the
/// dispatch reaches only after the backend was checked against the CPU.
pub(crate) trait Lanes: Sized {
    /// The machine word.
    type W: Word;
    /// One vector.
    type V: Copy;
    /// Broadcast constants of one scalar multiplier (Shoup).
    type S: Copy;
    /// The scalars of a modulus the constants are made from ([`Lanes::new`]), computed
    /// outside the vector code: they may divide 128-bit numbers, a library call that no vector
    /// constant may live across (it would stay spilled to the stack in the loops).
    type Scalars: Copy;
    /// Scalar companions of a multiplier, computed outside the vector code too.
    type Pre: Copy;
    /// Words per vector.
    const LANES: usize;
    /// Whether the key-switching step `acc0 += x b; acc1 += x a` runs as one fused pass (else
    /// as two `mul_add` passes).
    const FUSED_MUL_ADD2: bool = false;

    /// Whether the vector arithmetic takes modulus `m` (else the whole job runs portably).
    fn takes(m: &Modulus<Self::W>) -> bool;
    /// The scalars of modulus `m`.
    fn scalars(m: &Modulus<Self::W>) -> Self::Scalars;
    /// The companions of the multiplier `s < q`.
    fn pre(m: &Modulus<Self::W>, s: Self::W) -> Self::Pre;
    /// Broadcasts the constants of a modulus.
    unsafe fn new(sc: &Self::Scalars) -> Self;
    /// Unaligned load of one vector from `p`.
    unsafe fn load(&self, p: *const Self::W) -> Self::V;
    /// Unaligned store of one vector to `p`.
    unsafe fn store(&self, p: *mut Self::W, v: Self::V);
    /// `a + b mod q`.
    unsafe fn add(&self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b mod q`.
    unsafe fn sub(&self, a: Self::V, b: Self::V) -> Self::V;
    /// `-a mod q`.
    unsafe fn neg(&self, a: Self::V) -> Self::V;
    /// `a * b mod q`.
    unsafe fn mul(&self, a: Self::V, b: Self::V) -> Self::V;
    /// `acc + a * b mod q`.
    unsafe fn mul_add(&self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// `x mod q` for a word `x` of any value.
    unsafe fn reduce(&self, x: Self::V) -> Self::V;
    /// Broadcasts a multiplier's companions.
    unsafe fn scalar(&self, pre: Self::Pre) -> Self::S;
    /// `x * s mod q`.
    unsafe fn mul_scalar(&self, x: Self::V, s: &Self::S) -> Self::V;
    /// `acc + x * s mod q` for `x` below `2^(W::MAX_PRIME_BITS + 1)`.
    unsafe fn mul_scalar_add(&self, acc: Self::V, x: Self::V, s: &Self::S) -> Self::V;
    /// `(a - b) * s mod q`.
    unsafe fn sub_mul_scalar(&self, a: Self::V, b: Self::V, s: &Self::S) -> Self::V;
}

/// A vector driver: [`vector`] under one instruction set's features.
pub(crate) type Drive<L> = unsafe fn(
    &mut Job<'_, <L as Lanes>::W>,
    &<L as Lanes>::Scalars,
    Option<<L as Lanes>::Pre>,
) -> usize;

/// Defines `pub(crate) fn $name(m, job)`, backend `$lanes` under the features `$feat`: the
/// `#[target_feature]` driver and [`run`] around it.
macro_rules! backend {
    ($(#[$doc:meta])* $name:ident, $feat:literal, $w:ty, $lanes:ty) => {
        $(#[$doc])*
        pub(crate) fn $name(m: &Modulus<$w>, job: Job<'_, $w>) {
            /// The vector loops compiled for this instruction set.
            ///
            /// # Safety
            /// The CPU has the features.
            #[target_feature(enable = $feat)]
            unsafe fn drive(
                job: &mut Job<'_, $w>,
                sc: &<$lanes as super::skeleton::Lanes>::Scalars,
                pre: Option<<$lanes as super::skeleton::Lanes>::Pre>,
            ) -> usize {
                // SAFETY: the features are enabled here (caller's contract).
                unsafe { super::skeleton::vector::<$lanes>(job, sc, pre) }
            }
            super::skeleton::run::<$lanes>(m, job, drive)
        }
    };
}
pub(crate) use backend;

/// Runs `job` on backend `L`: whole vectors through `drive`, the rest through the portable
/// kernels.
///
/// `drive` must be a backend the dispatch checked against this CPU (every caller matches on a
/// checked [`crate::Backend`]).
pub(crate) fn run<L: Lanes>(m: &Modulus<L::W>, mut job: Job<'_, L::W>, drive: Drive<L>) {
    if !L::takes(m) {
        return scalar::run(m, job);
    }
    if !L::FUSED_MUL_ADD2 {
        if let Job::MulAdd2 {
            acc0,
            acc1,
            x,
            b,
            a,
        } = job
        {
            run::<L>(m, Job::MulAdd { acc: acc0, a: x, b }, drive);
            let job = Job::MulAdd {
                acc: acc1,
                a: x,
                b: a,
            };
            return run::<L>(m, job, drive);
        }
    }
    let pre = match job {
        Job::MulScalar { s, .. } | Job::MulScalarAdd { s, .. } | Job::SubMulScalar { s, .. } => {
            Some(L::pre(m, s))
        }
        _ => None,
    };
    // SAFETY: the backend `L` was checked against the CPU before it was dispatched to.
    let done = unsafe { drive(&mut job, &L::scalars(m), pre) };
    scalar::run(m, job.skip(done));
}

/// The vector loops of every job: the body of each backend's driver (see [`backend`]).
///
/// # Safety
/// The CPU has `L`'s features (this is inlined into its `#[target_feature]` function).
#[inline(always)]
pub(crate) unsafe fn vector<L: Lanes>(
    job: &mut Job<'_, L::W>,
    sc: &L::Scalars,
    pre: Option<L::Pre>,
) -> usize {
    let n = job.len();
    let full = n - n % L::LANES;
    // SAFETY: the features are enabled (caller); every pointer below is read or written only
    // at indices below `full <= n`, the length of every operand (`Job::len`); an in-place
    // operand (`a: None`) is read through the output pointer before that vector is written.
    // Each arm broadcasts its own constants right before its loop (constants made in a shared
    // block cost extra multiplies: LLVM then no longer sees that `vpmuludq` reads their low
    // halves only). A job with a multiplier comes with its companions (`pre`); without them it
    // is left to the portable tail.
    unsafe {
        match job {
            Job::Binary { op, out, a, b } => {
                let l = L::new(sc);
                let o = out.as_mut_ptr();
                let (a, b) = (in_place(o, a), b.as_ptr());
                match op {
                    BinOp::Add => zip(&l, full, o, a, b, |x, y| l.add(x, y)),
                    BinOp::Sub => zip(&l, full, o, a, b, |x, y| l.sub(x, y)),
                    BinOp::Mul => zip(&l, full, o, a, b, |x, y| l.mul(x, y)),
                }
            }
            Job::Neg { out, a } => {
                let l = L::new(sc);
                let o = out.as_mut_ptr();
                let a = in_place(o, a);
                zip(&l, full, o, a, a, |x, _| l.neg(x));
            }
            Job::Reduce { out, a } => {
                let l = L::new(sc);
                let o = out.as_mut_ptr();
                let a = in_place(o, a);
                zip(&l, full, o, a, a, |x, _| l.reduce(x));
            }
            Job::MulScalar { out, a, .. } => {
                let Some(pre) = pre else { return 0 };
                let l = L::new(sc);
                let s = l.scalar(pre);
                let o = out.as_mut_ptr();
                let a = in_place(o, a);
                zip(&l, full, o, a, a, |x, _| l.mul_scalar(x, &s));
            }
            Job::MulScalarAdd { acc, a, .. } => {
                let Some(pre) = pre else { return 0 };
                let l = L::new(sc);
                let s = l.scalar(pre);
                let o = acc.as_mut_ptr();
                zip(&l, full, o, o, a.as_ptr(), |z, x| {
                    l.mul_scalar_add(z, x, &s)
                });
            }
            Job::SubMulScalar { a, b, .. } => {
                let Some(pre) = pre else { return 0 };
                let l = L::new(sc);
                let s = l.scalar(pre);
                let o = a.as_mut_ptr();
                zip(&l, full, o, o, b.as_ptr(), |x, y| {
                    l.sub_mul_scalar(x, y, &s)
                });
            }
            Job::MulAdd { acc, a, b } => {
                let l = L::new(sc);
                let (o, a, b) = (acc.as_mut_ptr(), a.as_ptr(), b.as_ptr());
                for i in (0..full).step_by(L::LANES) {
                    let v = l.mul_add(l.load(o.add(i)), l.load(a.add(i)), l.load(b.add(i)));
                    l.store(o.add(i), v);
                }
            }
            Job::MulAdd2 {
                acc0,
                acc1,
                x,
                b,
                a,
            } => {
                let l = L::new(sc);
                let (o0, o1) = (acc0.as_mut_ptr(), acc1.as_mut_ptr());
                let (x, b, a) = (x.as_ptr(), b.as_ptr(), a.as_ptr());
                for i in (0..full).step_by(L::LANES) {
                    // The shared factor is loaded once for both accumulators.
                    let xv = l.load(x.add(i));
                    let v0 = l.mul_add(l.load(o0.add(i)), xv, l.load(b.add(i)));
                    let v1 = l.mul_add(l.load(o1.add(i)), xv, l.load(a.add(i)));
                    l.store(o0.add(i), v0);
                    l.store(o1.add(i), v1);
                }
            }
        }
    }
    full
}

/// The left operand's pointer: `a`, or the output pointer `o` itself when the job runs in
/// place (derived from `o`, so that writes through `o` keep it valid).
#[inline(always)]
fn in_place<W>(o: *mut W, a: &Option<&[W]>) -> *const W {
    a.map_or(o as *const W, <[W]>::as_ptr)
}

/// `o[i] = f(a[i], b[i])` for `i < full`, one vector at a time (`a` or `b` may be `o`: each
/// vector is read before it is written).
///
/// # Safety
/// The CPU has `L`'s features; the pointers hold `full` words.
#[inline(always)]
unsafe fn zip<L: Lanes>(
    l: &L,
    full: usize,
    o: *mut L::W,
    a: *const L::W,
    b: *const L::W,
    f: impl Fn(L::V, L::V) -> L::V,
) {
    for i in (0..full).step_by(L::LANES) {
        // SAFETY: i + LANES <= full (caller).
        unsafe { l.store(o.add(i), f(l.load(a.add(i)), l.load(b.add(i)))) };
    }
}
