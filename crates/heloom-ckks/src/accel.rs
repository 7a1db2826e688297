//! Hooks for accelerator backends (heloom-gpu): the precomputed constants an accelerator needs
//! to reproduce the CPU's key switching and rescaling bit for bit, bounds-checked, behind
//! [`Context::accel`] so they stay out of the everyday API.

use crate::context::Context;
use crate::error::{CkksError, Result};
use heloom_math::rns::BasisConverter;
use heloom_math::scaling::ModDown;
use heloom_math::Word;

/// The accelerator view of a [`Context`] ([`Context::accel`]).
#[derive(Clone, Copy, Debug)]
pub struct Accel<'a, W: Word> {
    ctx: &'a Context<W>,
}

impl<W: Word> Context<W> {
    /// The constants an accelerator backend needs (see [`crate::accel`]).
    pub fn accel(&self) -> Accel<'_, W> {
        Accel { ctx: self }
    }
}

impl<'a, W: Word> Accel<'a, W> {
    /// The mod-up converter of key-switching digit `digit` at `level`: from the digit's primes
    /// to every other prime of `Q_level P`, in basis order (for accelerator backends that must
    /// reproduce the CPU's key switching bit for bit).
    pub fn modup_converter(&self, level: usize, digit: usize) -> Result<&'a BasisConverter<W>> {
        self.ctx
            .modup
            .get(level)
            .ok_or_else(|| self.ctx.level_error(level))?
            .get(digit)
            .ok_or_else(|| {
                CkksError::InvalidInput(format!(
                    "key-switching digit {digit} does not exist at level {level}"
                ))
            })
    }

    /// The mod-down converter at `level`: from the special primes `P` to `q_0 .. q_level`.
    pub fn moddown_converter(&self, level: usize) -> Result<&'a BasisConverter<W>> {
        self.ctx.moddown(level).map(ModDown::converter)
    }

    /// The merged mod-down-and-rescale converter at `level >= 1`: from `q_level` and the
    /// special primes to `q_0 .. q_(level-1)` (a relinearization's rescale merged into its
    /// mod-down, `Evaluator::with_merged_rescale`).
    pub fn moddown_rescale_converter(&self, level: usize) -> Result<&'a BasisConverter<W>> {
        self.ctx.moddown_rescale(level).map(ModDown::converter)
    }

    /// `(q_level P)^-1 mod q_i` (the merged mod-down's scale) for `i < level`.
    pub fn moddown_rescale_inv_mod(&self, level: usize, i: usize) -> Result<u64> {
        self.ctx
            .moddown_rescale(level)?
            .p_inv()
            .get(i)
            .copied()
            .ok_or_else(|| {
                CkksError::InvalidInput(format!(
                    "no merged mod-down constant for prime {i} at level {level}"
                ))
            })
    }

    /// `P mod q_i` for `i` in `0..=max_level` (the merged mod-down adds `P c` first).
    pub fn p_mod_q(&self, i: usize) -> Result<u64> {
        if i > self.ctx.max_level() {
            return Err(self.ctx.level_error(i));
        }
        Ok(self.ctx.p_mod_q(i))
    }

    /// `P^-1 mod q_i` (the mod-down scale) for `i` in `0..=max_level`.
    pub fn p_inv_mod(&self, i: usize) -> Result<u64> {
        self.ctx
            .moddown
            .last()
            .and_then(|m| m.p_inv().get(i))
            .copied()
            .ok_or_else(|| self.ctx.level_error(i))
    }

    /// `q_level^-1 mod q_i` (the rescale scale) for `i < level`.
    pub fn rescale_inv_mod(&self, level: usize, i: usize) -> Result<u64> {
        self.ctx
            .rescalers
            .get(level.wrapping_sub(1))
            .and_then(|r| r.inv_last().get(i))
            .copied()
            .ok_or_else(|| {
                CkksError::InvalidInput(format!(
                    "no rescale constant for prime {i} at level {level}"
                ))
            })
    }

    /// Primes `lo..hi` of `q_0 .. q_level` that make up key-switching digit `j`.
    pub fn digit_primes(&self, level: usize, j: usize) -> (usize, usize) {
        self.ctx.digit_range(level, j)
    }
}
