//! The computations behind the evaluator's mixed-operand methods and the ciphertext's
//! operators, generic over the word size (no Python objects: they run without the GIL).

use crate::convert::{Operand, Scalar, Values};
use crate::words::{mismatch, words_wrap, CtW, EvW, PtW, Words};
use heloom_ckks::{Ciphertext, CkksError, Evaluator, Plaintext, Result};
use heloom_math::Word;

/// A word size: picks its instantiation out of a [`Words`].
pub trait Pick: Word {
    /// The ciphertext, if it has this word size.
    fn ct(c: &CtW) -> Result<&Ciphertext<Self>>;
    /// The plaintext, if it has this word size.
    fn pt(p: &PtW) -> Result<&Plaintext<Self>>;
}

/// [`Pick`] for the word `$w`, held in the `Words::$this` variant (`$other`: the other one).
macro_rules! pick {
    ($w:ty, $this:ident, $other:ident) => {
        impl Pick for $w {
            fn ct(c: &CtW) -> Result<&Ciphertext<$w>> {
                match c {
                    Words::$this(x) => Ok(x),
                    Words::$other(_) => Err(mismatch()),
                }
            }
            fn pt(p: &PtW) -> Result<&Plaintext<$w>> {
                match p {
                    Words::$this(x) => Ok(x),
                    Words::$other(_) => Err(mismatch()),
                }
            }
        }
    };
}

pick!(u32, W32, W64);
pick!(u64, W64, W32);

/// Who is asking: an evaluator method (scale management left to the caller) or a ciphertext
/// operator (scale management done for the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The evaluator's methods: results at the product scale, mismatched scales raise.
    Explicit,
    /// The operators: products relinearized and rescaled; two ciphertexts at one level whose
    /// scales differ are aligned at the cost of a level.
    Operator,
}

/// `v` zero-padded to `slots` values. Encoding fewer values than a ciphertext's slots would
/// repeat them periodically (sparse packing); operands are zero-padded instead.
fn padded<T: Copy + Default>(v: &[T], slots: usize) -> std::borrow::Cow<'_, [T]> {
    if v.len() >= slots {
        std::borrow::Cow::Borrowed(v)
    } else {
        let mut p = v.to_vec();
        p.resize(slots, T::default());
        std::borrow::Cow::Owned(p)
    }
}

fn plain_values<W: Pick>(ev: &Evaluator<W>, a: &Ciphertext<W>, v: &Values) -> Result<Plaintext<W>> {
    let ctx = ev.context();
    match v {
        Values::Real(v) => ctx.encode_at(&padded(v, a.slots()), a.level(), a.scale()),
        Values::Complex(v) => ctx.encode_complex_at(&padded(v, a.slots()), a.level(), a.scale()),
    }
}

fn add_cts<W: Pick>(
    ev: &Evaluator<W>,
    a: &Ciphertext<W>,
    b: &Ciphertext<W>,
    sub: bool,
) -> Result<Ciphertext<W>> {
    if sub {
        ev.sub(a, b)
    } else {
        ev.add(a, b)
    }
}

fn add_gen<W: Pick>(
    ev: &Evaluator<W>,
    a: &Ciphertext<W>,
    b: &Operand<'_>,
    sub: bool,
    mode: Mode,
) -> Result<Ciphertext<W>> {
    match b {
        Operand::Ct(c) => {
            let c = W::ct(c)?;
            match add_cts(ev, a, c, sub) {
                // Same level, scales apart (e.g. a product plus a fresh ciphertext): one level
                // down, `c` multiplied by the integer that moves its scale onto `a`'s.
                Err(e @ CkksError::ScaleMismatch(_))
                    if mode == Mode::Operator && a.level() == c.level() && a.level() > 0 =>
                {
                    let l = a.level() - 1;
                    let moved = match ev.set_scale_by_rescale(c, l, a.scale()) {
                        Ok(m) => m,
                        Err(_) => return Err(e),
                    };
                    add_cts(ev, &ev.drop_to_level(a, l)?, &moved, sub)
                }
                r => r,
            }
        }
        Operand::Pt(p) => {
            let p = W::pt(p)?;
            if sub {
                ev.sub_plain(a, p)
            } else {
                ev.add_plain(a, p)
            }
        }
        Operand::Scalar(s) => {
            let c = s.to_complex();
            ev.add_const_complex(a, if sub { -c } else { c })
        }
        Operand::Values(v) => {
            let p = plain_values(ev, a, v)?;
            if sub {
                ev.sub_plain(a, &p)
            } else {
                ev.add_plain(a, &p)
            }
        }
    }
}

/// `a + b` or `a - b` for a ciphertext, plaintext, number or values `b`.
pub fn add(ev: &EvW, a: &CtW, b: &Operand<'_>, sub: bool, mode: Mode) -> Result<CtW> {
    words_wrap!((ev, a) => |e, x| add_gen(e, x, b, sub, mode))
}

/// `b - a` (the reflected operator).
pub fn rsub(ev: &EvW, a: &CtW, b: &Operand<'_>) -> Result<CtW> {
    words_wrap!((ev, a) => |e, x| {
        let n = e.negate(x)?;
        add_gen(e, &n, b, false, Mode::Operator)
    })
}

fn mul_const_gen<W: Pick>(
    ev: &Evaluator<W>,
    a: &Ciphertext<W>,
    s: Scalar,
    mode: Mode,
) -> Result<Ciphertext<W>> {
    let m = match s {
        Scalar::Int(k) if mode == Mode::Operator => return ev.multiply_int(a, k),
        Scalar::Complex(c) if c.im != 0.0 => ev.multiply_const_complex(a, c)?,
        s => ev.multiply_const(a, s.to_complex().re)?,
    };
    match mode {
        Mode::Operator => ev.rescale(&m),
        Mode::Explicit => Ok(m),
    }
}

/// `a * c` for a constant `c` by [`Evaluator::multiply_const`] (encoded at the next prime;
/// rescaled when asked). With [`Mode::Operator`], integers use the exact `multiply_int`.
pub fn mul_const(ev: &EvW, a: &CtW, s: Scalar, mode: Mode) -> Result<CtW> {
    words_wrap!((ev, a) => |e, x| mul_const_gen(e, x, s, mode))
}

fn mul_gen<W: Pick>(
    ev: &Evaluator<W>,
    a: &Ciphertext<W>,
    b: &Operand<'_>,
    mode: Mode,
) -> Result<Ciphertext<W>> {
    let m = match b {
        Operand::Ct(c) => {
            let c = W::ct(c)?;
            let m = ev.multiply(a, c)?;
            match mode {
                Mode::Operator => ev.relinearize(&m)?,
                Mode::Explicit => m,
            }
        }
        Operand::Pt(p) => ev.multiply_plain(a, W::pt(p)?)?,
        Operand::Values(Values::Real(v)) => ev.multiply_values(a, &padded(v, a.slots()))?,
        Operand::Values(Values::Complex(v)) => {
            ev.multiply_values_complex(a, &padded(v, a.slots()))?
        }
        Operand::Scalar(s) => return mul_const_gen(ev, a, *s, mode),
    };
    match mode {
        Mode::Operator => ev.rescale(&m),
        Mode::Explicit => Ok(m),
    }
}

/// `a * b` for a ciphertext, plaintext, number or values `b`. [`Mode::Operator`] is the `*`
/// operator: relinearize and rescale.
pub fn mul(ev: &EvW, a: &CtW, b: &Operand<'_>, mode: Mode) -> Result<CtW> {
    words_wrap!((ev, a) => |e, x| mul_gen(e, x, b, mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::Scalar;
    use heloom_ckks::{keygen, CkksParameters, Context, Decryptor, Encryptor};
    use std::sync::Arc;

    type Setup = (EvW, CtW, CtW, Box<dyn Fn(&CtW) -> Vec<f64>>);

    fn setup(word_bits: u32) -> Setup {
        let (levels, scale) = if word_bits == 64 { (2, 40) } else { (3, 28) };
        let params = CkksParameters::new(1 << 12, levels, scale, word_bits)
            .or_else(|_| {
                CkksParameters::builder(1 << 12)
                    .word_bits(word_bits)
                    .levels(levels)
                    .scale_bits(scale)
                    .security(heloom_ckks::SecurityLevel::None)
                    .build()
            })
            .expect("parameters");
        macro_rules! build {
            ($w:ty, $v:ident) => {{
                let ctx = Context::<$w>::new(params).expect("context");
                let keys = keygen(&ctx, &[1], false).expect("keys");
                let enc = Encryptor::new(&ctx);
                let a = enc.encrypt(&[0.5, -0.25], &keys.public_key).expect("a");
                let b = enc.encrypt(&[2.0, 0.75], &keys.public_key).expect("b");
                let dec = Decryptor::new(&ctx, &keys.secret_key).expect("decryptor");
                let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys)).expect("ev");
                let f = move |c: &CtW| match c {
                    Words::$v(c) => dec.decrypt(c).expect("decrypt"),
                    _ => panic!("word size"),
                };
                (
                    Words::$v(ev),
                    Words::$v(a),
                    Words::$v(b),
                    Box::new(f) as Box<_>,
                )
            }};
        }
        if word_bits == 64 {
            build!(u64, W64)
        } else {
            build!(u32, W32)
        }
    }

    fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
        got.iter().zip(want).all(|(g, w)| (g - w).abs() < tol)
    }

    #[test]
    fn operators_on_both_word_sizes() {
        for (wb, tol) in [(64, 1e-6), (32, 1e-3)] {
            let (ev, a, b, dec) = setup(wb);
            let sum = add(&ev, &a, &Operand::Ct(&b), false, Mode::Operator).expect("add");
            assert!(close(&dec(&sum), &[2.5, 0.5], tol));
            let prod = mul(&ev, &a, &Operand::Ct(&b), Mode::Operator).expect("mul");
            assert!(close(&dec(&prod), &[1.0, -0.1875], tol));
            let vals = Values::Real(vec![4.0]);
            let pv = mul(&ev, &a, &Operand::Values(&vals), Mode::Operator).expect("values");
            // Zero-padded, not repeated: slot 1 is multiplied by 0.
            assert!(close(&dec(&pv), &[2.0, 0.0], tol));
            let k = mul_const(&ev, &a, Scalar::Int(-3), Mode::Operator).expect("int");
            assert!(close(&dec(&k), &[-1.5, 0.75], tol));
            let r = rsub(&ev, &a, &Operand::Scalar(Scalar::Real(1.0))).expect("rsub");
            assert!(close(&dec(&r), &[0.5, 1.25], tol));
        }
    }

    #[test]
    fn word_sizes_do_not_mix() {
        let (ev64, a64, _, _) = setup(64);
        let (_, a32, _, _) = setup(32);
        let err = add(&ev64, &a64, &Operand::Ct(&a32), false, Mode::Explicit);
        assert!(matches!(err, Err(CkksError::ParameterMismatch(_))));
        let err = mul(&ev64, &a32, &Operand::Ct(&a64), Mode::Explicit);
        assert!(matches!(err, Err(CkksError::ParameterMismatch(_))));
    }
}
