//! PLACEHOLDER (being written): element-wise kernels for this backend. Delegates to scalar for now.

use super::{scalar, BinOp};
use crate::modulus::Modulus;

pub(crate) fn binary(op: BinOp, m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, b: &[u32]) {
    scalar::binary(op, m, out, a, b)
}

pub(crate) fn neg(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>) {
    scalar::neg(m, out, a)
}

pub(crate) fn mul_scalar(m: &Modulus<u32>, out: &mut [u32], a: Option<&[u32]>, s: u32) {
    scalar::mul_scalar(m, out, a, s)
}

pub(crate) fn mul_add(m: &Modulus<u32>, acc: &mut [u32], a: &[u32], b: &[u32]) {
    scalar::mul_add(m, acc, a, b)
}
