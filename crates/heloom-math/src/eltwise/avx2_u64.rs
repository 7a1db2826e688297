//! PLACEHOLDER (being written): element-wise kernels for this backend. Delegates to scalar for now.

use super::{scalar, BinOp};
use crate::modulus::Modulus;

pub(crate) fn binary(op: BinOp, m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, b: &[u64]) {
    scalar::binary(op, m, out, a, b)
}

pub(crate) fn neg(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>) {
    scalar::neg(m, out, a)
}

pub(crate) fn mul_scalar(m: &Modulus<u64>, out: &mut [u64], a: Option<&[u64]>, s: u64) {
    scalar::mul_scalar(m, out, a, s)
}

pub(crate) fn mul_add(m: &Modulus<u64>, acc: &mut [u64], a: &[u64], b: &[u64]) {
    scalar::mul_add(m, acc, a, b)
}
