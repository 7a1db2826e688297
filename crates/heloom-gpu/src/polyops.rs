//! Task graphs on the GPU: [`PolyOps`] for [`GpuEvaluator`], so the runtime's `TaskGraph::run`
//! (and polynomial evaluation) keep every intermediate ciphertext on the device. Each op is
//! bit-exact with the CPU evaluator's, so a graph's result is too.

use crate::context::{GpuCiphertext, GpuContext, GpuEvaluator};
use crate::error::GpuError;
use crate::word::GpuWord;
use heloom_ckks::{CkksError, PolyOps, Result};
use heloom_math::automorphism::galois_element_for_step;

/// A GPU error as the CKKS layer's error (what [`PolyOps`] returns).
pub fn to_ckks(e: GpuError) -> CkksError {
    match e {
        GpuError::Ckks(e) => e,
        GpuError::Math(e) => CkksError::Math(e),
        other => CkksError::Backend(other.to_string()),
    }
}

/// [`PolyOps`] methods that read a [`GpuCiphertext`]: `name -> Type = its accessor;`.
macro_rules! ct_accessors {
    ($($name:ident -> $ty:ty = $get:ident;)*) => {$(
        fn $name(&self, ct: &Self::Ct) -> $ty {
            ct.$get()
        }
    )*};
}

/// [`PolyOps`] methods a [`GpuEvaluator`] runs with its context's (which need no key).
macro_rules! on_context {
    ($(fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $name(&self, $($arg: $ty),*) -> Result<Self::Ct> {
            PolyOps::$name(self.context().as_ref(), $($arg),*)
        }
    )*};
}

/// Every op that needs no key: a [`GpuContext`] alone runs graphs without relinearization.
impl<W: GpuWord> PolyOps for GpuContext<W> {
    type Ct = GpuCiphertext<W>;
    fn moduli(&self) -> &[u64] {
        self.context().params().moduli()
    }
    ct_accessors! {
        level_of -> usize = level;
        scale_of -> f64 = scale;
        size_of -> usize = size;
    }
    fn with_scale(&self, ct: Self::Ct, scale: f64) -> Result<Self::Ct> {
        GpuContext::with_scale(self, &ct, scale).map_err(to_ckks)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        GpuContext::add(self, a, b).map_err(to_ckks)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        GpuContext::sub(self, a, b).map_err(to_ckks)
    }
    fn add_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        GpuContext::add_const(self, ct, c).map_err(to_ckks)
    }
    fn multiply_int(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct> {
        GpuContext::multiply_int(self, ct, k).map_err(to_ckks)
    }
    fn multiply_const_exact(&self, ct: &Self::Ct, k: i128) -> Result<Self::Ct> {
        GpuContext::multiply_const_exact(self, ct, k).map_err(to_ckks)
    }
    fn multiply_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        GpuContext::multiply_const(self, ct, c).map_err(to_ckks)
    }
    fn multiply(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        GpuContext::multiply(self, a, b).map_err(to_ckks)
    }
    fn square(&self, a: &Self::Ct) -> Result<Self::Ct> {
        GpuContext::square(self, a).map_err(to_ckks)
    }
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct> {
        if a.size() == 2 {
            return Ok(a.clone());
        }
        Err(CkksError::MissingKey {
            key: heloom_ckks::MissingKeyKind::Relinearization,
            hint: "relinearization on the GPU needs the keys: use a GpuEvaluator".into(),
        })
    }
    fn rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        GpuContext::rescale(self, a).map_err(to_ckks)
    }
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct> {
        GpuContext::drop_to_level(self, a, level).map_err(to_ckks)
    }
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct> {
        // As the CPU: the shape is checked before a trivial step returns the input.
        if ct.size() != 2 {
            return Err(CkksError::InvalidInput(
                "rotate takes a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        let g = galois_element_for_step(self.n(), step);
        if g == 1 {
            return Ok(ct.clone());
        }
        Err(CkksError::MissingKey {
            key: heloom_ckks::MissingKeyKind::Galois { element: g },
            hint: format!("rotation by {step} on the GPU needs its Galois key: use a GpuEvaluator"),
        })
    }
    fn multiply_plain_slots(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct> {
        GpuContext::multiply_plain_slots(self, ct, values).map_err(to_ckks)
    }
}

/// The context's ops, plus relinearization and rotations with the evaluator's keys.
impl<W: GpuWord> PolyOps for GpuEvaluator<W> {
    type Ct = GpuCiphertext<W>;
    fn moduli(&self) -> &[u64] {
        PolyOps::moduli(self.context().as_ref())
    }
    ct_accessors! {
        level_of -> usize = level;
        scale_of -> f64 = scale;
        size_of -> usize = size;
    }
    on_context! {
        fn with_scale(ct: Self::Ct, scale: f64);
        fn add(a: &Self::Ct, b: &Self::Ct);
        fn sub(a: &Self::Ct, b: &Self::Ct);
        fn add_const(ct: &Self::Ct, c: f64);
        fn multiply_int(ct: &Self::Ct, k: i64);
        fn multiply_const_exact(ct: &Self::Ct, k: i128);
        fn multiply_const(ct: &Self::Ct, c: f64);
        fn multiply(a: &Self::Ct, b: &Self::Ct);
        fn square(a: &Self::Ct);
    }
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct> {
        if a.size() == 2 {
            return Ok(a.clone());
        }
        GpuEvaluator::relinearize(self, a).map_err(to_ckks)
    }
    fn relinearize_rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        if self.merged_rescale() && a.size() == 3 {
            return GpuEvaluator::relinearize_rescale(self, a).map_err(to_ckks);
        }
        let r = PolyOps::relinearize(self, a)?;
        PolyOps::rescale(self, &r)
    }
    fn merges_rescale(&self) -> bool {
        self.merged_rescale()
    }
    on_context! {
        fn rescale(a: &Self::Ct);
        fn drop_to_level(a: &Self::Ct, level: usize);
        fn multiply_plain_slots(ct: &Self::Ct, values: &[f64]);
    }
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct> {
        GpuEvaluator::rotate(self, ct, step).map_err(to_ckks)
    }
    fn rotate_many(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>> {
        if ct.size() != 2 {
            return Err(CkksError::InvalidInput(
                "rotate takes a two-polynomial ciphertext; relinearize first".into(),
            ));
        }
        GpuEvaluator::rotate_many(self, ct, steps).map_err(to_ckks)
    }
}
