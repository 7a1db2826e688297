//! Task graphs on the GPU: [`PolyOps`] for [`GpuEvaluator`], so the runtime's `TaskGraph::run`
//! (and polynomial evaluation) keep every intermediate ciphertext on the device. Each op is
//! bit-exact with the CPU evaluator's, so a graph's result is too.

use crate::context::{GpuCiphertext, GpuEvaluator};
use crate::error::GpuError;
use crate::word::GpuWord;
use heloom_ckks::{CkksError, PolyOps, Result};

/// A GPU error as the CKKS layer's error (what [`PolyOps`] returns).
pub fn to_ckks(e: GpuError) -> CkksError {
    match e {
        GpuError::Ckks(e) => e,
        GpuError::Math(e) => CkksError::Math(e),
        other => CkksError::Backend(other.to_string()),
    }
}

impl<W: GpuWord> PolyOps for GpuEvaluator<W> {
    type Ct = GpuCiphertext<W>;
    fn moduli(&self) -> &[u64] {
        self.context().context().params().moduli()
    }
    fn level_of(&self, ct: &Self::Ct) -> usize {
        ct.level()
    }
    fn scale_of(&self, ct: &Self::Ct) -> f64 {
        ct.scale()
    }
    fn size_of(&self, ct: &Self::Ct) -> usize {
        ct.size()
    }
    fn with_scale(&self, ct: Self::Ct, scale: f64) -> Result<Self::Ct> {
        self.context().with_scale(&ct, scale).map_err(to_ckks)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.context().add(a, b).map_err(to_ckks)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.context().sub(a, b).map_err(to_ckks)
    }
    fn add_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        self.context().add_const(ct, c).map_err(to_ckks)
    }
    fn multiply_int(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct> {
        self.context().multiply_int(ct, k).map_err(to_ckks)
    }
    fn multiply_const_exact(&self, ct: &Self::Ct, k: i128) -> Result<Self::Ct> {
        self.context().multiply_const_exact(ct, k).map_err(to_ckks)
    }
    fn multiply_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        self.context().multiply_const(ct, c).map_err(to_ckks)
    }
    fn multiply(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.context().multiply(a, b).map_err(to_ckks)
    }
    fn square(&self, a: &Self::Ct) -> Result<Self::Ct> {
        self.context().square(a).map_err(to_ckks)
    }
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct> {
        if a.size() == 2 {
            return Ok(a.clone());
        }
        GpuEvaluator::relinearize(self, a).map_err(to_ckks)
    }
    fn rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        self.context().rescale(a).map_err(to_ckks)
    }
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct> {
        self.context().drop_to_level(a, level).map_err(to_ckks)
    }
}
