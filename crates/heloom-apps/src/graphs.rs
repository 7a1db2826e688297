//! The applications as heloom-runtime task graphs: recorded with
//! [`GraphBuilder`] (which implements [`PolyOps`]), so that a service runs them through the
//! runtime's scheduler like any other job (`heloom serve`'s `matmul` and `cryptonets` tasks).
//! Plaintext weights live in the graph ([`TaskGraph::plain`]) or, for integer weights, in its
//! nodes; a graph depends only on the weights, the chain's primes and the inputs' level and
//! scale, never on keys, so one graph serves every tenant with those parameters.
//!
//! - [`matmul_graph`]: a plaintext `d x d` matrix times encrypted `d`-vectors, by generalized
//!   diagonals with baby-step giant-step (Halevi-Shoup 2014 Sec. 4.3, 2018 Sec. 4): the
//!   schedule of [`crate::matmul::diag`] (and [`heloom_ckks::LinearTransform::apply_on`]),
//!   operation for operation, so the result is word for word the in-process one.
//! - [`matmul_encrypted_graph`]: an encrypted `d x d` matrix times an encrypted `d x d` matrix
//!   (Jiang, Kim, Lauter, Song 2018, "JKLS18", Algorithm 2, with baby-step giant-step): the
//!   schedule of [`crate::matmul::jiang::JiangMultiplier`] with the same masks, rotations and
//!   levels, so the result is word for word the in-process one.
//! - [`cryptonets_graph`]: CryptoNets inference (Gilad-Bachrach et al. 2016) with
//!   [`Packing::Batch`] (one image per slot, 784 pixel ciphertexts: the computation of
//!   [`crate::cryptonets::batch::BatchNet`], word for word) or [`Packing::Single`] (one image
//!   per ciphertext, LoLa-style: the computation of
//!   [`crate::cryptonets::single::SingleNet`], with the biases folded into the masks and the
//!   dense layers as below).
//!
//! Single-image biases: the graph has no op that adds a plaintext vector, so a map's bias is
//! added as a constant before its mask (`mask ⊙ (c + b) = mask ⊙ c + b mask`), and a dense
//! layer's bias rides in one padding column `c*` of its matrix, which sees a 1 after a
//! constant 1 is added to the whole input: `M' (h + 1) = M h + b` with
//! `M'(r, c*) = b_r - sum_c M(r, c)` (the padding column holds 0 in `h`).
//!
//! Clients prepare inputs with [`batch_inputs`] / [`single_input`] / [`crate::matmul::diag::pack_vector`]
//! / [`crate::matmul::jiang::pack_matrix`], generate Galois keys for [`required_rotations`] (or
//! [`matmul_rotations`], [`matmul_encrypted_rotations`], [`cryptonets_rotations`]) and read
//! results with [`batch_logits`] / [`single_logits`] / [`crate::matmul::jiang::unpack_matrix`].

use crate::cryptonets::evaluate::Packing;
use crate::cryptonets::model::{
    CryptoNet, CLASSES, CONV_MAPS, CONV_OUT, FC1, HIDDEN, KERNEL, PADDED, STRIDE,
};
use crate::cryptonets::single::{
    slot_of_hidden, BLOCK, D1_BABY, D1_COLS, D1_ROWS, D2_BABY, D2_ROWS, KPOS, MAP,
};
use crate::cryptonets::{batch, single};
use crate::error::{AppError, Result};
use crate::matmul::jiang::{self, Masks};
use crate::matmul::{canonical, padded, Matrix};
use crate::mnist::{PIXELS, SIDE};
use heloom_ckks::circuits::lintrans::{baby_steps, rotate_values};
use heloom_ckks::{CkksError, PolyOps};
use heloom_runtime::graph::{GraphBuilder, NodeOp, TaskGraph, Value};

/// Slots of a single-image ciphertext (32 blocks of 256): encrypt exactly this many values
/// ([`single_input`]); at N > 2^14 the packing is sparse and rotations still wrap at 8192.
pub const SINGLE_SLOTS: usize = 32 * BLOCK;

/// Giant-step groups: `(a, [(b, rot(diag_{g a + b}, -g a))])`.
type Groups = Vec<(usize, Vec<(usize, Vec<f64>)>)>;

/// Pre-rotated generalized diagonals with baby-step giant-step, values only (the plaintexts
/// are encoded by whichever backend runs the graph): the schedule of
/// [`heloom_ckks::LinearTransform`] (HS18, Sec. 4.1-4.2), all-zero diagonals skipped.
#[derive(Clone, Debug)]
struct Diagonals {
    baby: usize,
    /// Non-empty groups in increasing `a`.
    groups: Groups,
}

impl Diagonals {
    /// `count` diagonals of `period` values each (`diagonal(i)`), `baby` baby steps.
    fn new(
        period: usize,
        count: usize,
        baby: usize,
        diagonal: impl Fn(usize) -> Vec<f64>,
    ) -> Result<Self> {
        if period == 0 || !period.is_power_of_two() || count > period || baby == 0 {
            return Err(AppError::Invalid(format!(
                "a linear transform takes a power-of-two period, at most that many diagonals \
                 and a baby-step count of at least 1; got period {period}, {count} diagonals, \
                 {baby} baby steps"
            )));
        }
        let mut groups: Groups = Vec::new();
        for i in 0..count {
            let diag = diagonal(i);
            if let Some(x) = diag.iter().find(|x| !x.is_finite()) {
                return Err(AppError::Invalid(format!(
                    "diagonal {i} holds {x}, not a finite number"
                )));
            }
            if diag.iter().all(|&x| x == 0.0) {
                continue;
            }
            let (a, b) = (i / baby, i % baby);
            let term = (b, rotate_values(&diag, -((baby * a) as i64)));
            match groups.last_mut() {
                Some((last, terms)) if *last == a => terms.push(term),
                _ => groups.push((a, vec![term])),
            }
        }
        Ok(Self { baby, groups })
    }

    /// Baby steps `b > 0` of the non-zero diagonals, increasing.
    fn babies(&self) -> Vec<i64> {
        let mut b: Vec<i64> = self
            .groups
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(b, _)| *b as i64))
            .filter(|&b| b > 0)
            .collect();
        b.sort_unstable();
        b.dedup();
        b
    }

    /// Every rotation step an application uses: the baby steps, then the giant steps.
    fn used_steps(&self) -> Vec<i64> {
        let giants = self
            .groups
            .iter()
            .filter(|(a, _)| *a > 0)
            .map(|(a, _)| (a * self.baby) as i64);
        self.babies().into_iter().chain(giants).collect()
    }

    /// `T(v)` before the rescale (scale `scale(v) * q_level`), as
    /// [`heloom_ckks::LinearTransform::apply_on`]: hoisted baby steps, one inner sum and
    /// giant rotation per group.
    fn apply_on<O: PolyOps>(&self, ops: &O, v: &O::Ct) -> heloom_ckks::Result<O::Ct> {
        if self.groups.is_empty() {
            return ops.multiply_const(v, 0.0);
        }
        let babies = self.babies();
        let rotated = ops.rotate_many(v, &babies)?;
        let mut acc: Option<O::Ct> = None;
        for (a, terms) in &self.groups {
            let mut inner: Option<O::Ct> = None;
            for (b, values) in terms {
                let x = match babies.iter().position(|&s| s as usize == *b) {
                    Some(i) => &rotated[i],
                    None => v,
                };
                let t = ops.multiply_plain_slots(x, values)?;
                inner = Some(match inner {
                    Some(y) => ops.add(&y, &t)?,
                    None => t,
                });
            }
            let Some(mut inner) = inner else { continue };
            if *a > 0 {
                inner = ops.rotate(&inner, (a * self.baby) as i64)?;
            }
            acc = Some(match acc {
                Some(y) => ops.add(&y, &inner)?,
                None => inner,
            });
        }
        acc.ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()))
    }
}

/// The diagonals of square `matrix` for vectors packed in `D = padded(d)` slots:
/// `diag_i[t] = M[t][(t + i) mod D]` (HS14, Sec. 4.3), `baby_steps(D)` baby steps.
fn matrix_diagonals(matrix: &Matrix) -> Result<Diagonals> {
    let d = matrix.side("the plaintext matrix")?;
    let size = padded(d);
    Diagonals::new(size, size, baby_steps(size), |i| {
        (0..size).map(|t| matrix.get(t, (t + i) % size)).collect()
    })
}

/// The rotation steps (Galois keys) [`matmul_graph`] uses for `matrix`: the baby and giant
/// steps of its non-zero diagonals (a subset of [`crate::matmul::diag::rotation_steps`]).
pub fn matmul_rotations(matrix: &Matrix) -> Result<Vec<i64>> {
    let mut s = matrix_diagonals(matrix)?.used_steps();
    s.sort_unstable();
    Ok(s)
}

/// The graph of `matrix` (`d x d`, plaintext) times `count` encrypted vectors: input `k` is a
/// ciphertext at `level` (at least 1) with `scale` packing the `D = padded(d)` values of
/// [`crate::matmul::diag::pack_vector`] (exactly `D` slots, so rotations wrap at `D`); output
/// `k` is `M x_k` in the first `d` slots, one level lower, at the input's scale. The same
/// rotations, plaintext products and sums as [`crate::matmul::diag::DiagonalMatrix`], so the
/// result is the in-process one word for word. Applying it to the columns of an encrypted
/// matrix `X` gives `M X`.
pub fn matmul_graph(
    matrix: &Matrix,
    moduli: &[u64],
    level: usize,
    scale: f64,
    count: usize,
) -> Result<TaskGraph> {
    if count == 0 {
        return Err(AppError::Invalid(
            "a matrix product needs at least one input vector".into(),
        ));
    }
    if level == 0 {
        return Err(AppError::Invalid(
            "the matrix-vector product uses one level; the inputs are at level 0: encrypt \
             them at a higher level"
                .into(),
        ));
    }
    let diags = matrix_diagonals(matrix)?;
    let b = GraphBuilder::new(format!("matmul-{}", matrix.rows()), moduli);
    let inputs = (0..count)
        .map(|_| b.input(level, scale))
        .collect::<heloom_ckks::Result<Vec<_>>>()?;
    let outs = inputs
        .iter()
        .map(|x| b.rescale(&diags.apply_on(&b, x)?))
        .collect::<heloom_ckks::Result<Vec<_>>>()?;
    Ok(b.finish(&outs)?)
}

/// Levels [`matmul_encrypted_graph`] uses (JKLS18's depth 3: `sigma`/`tau`, the column-shift
/// masks, the product): the inputs' level must be at least this, and the product comes out
/// this many levels lower.
pub const MATMUL_ENCRYPTED_LEVELS: usize = jiang::LEVELS;

/// The largest side `d` whose packing (`D^2` slots, `D = padded(d)`) fits the `N/2` slots of
/// the largest ring heloom supports.
fn max_encrypted_side() -> usize {
    1 << ((heloom_ckks::params::MAX_LOG_N - 1) / 2)
}

/// Refuses `d = 0` and sides no ring can pack.
fn check_encrypted_side(d: usize) -> Result<()> {
    if d == 0 {
        return Err(AppError::Invalid(
            "the encrypted matrix product needs d >= 1 (a d x d matrix has at least one row \
             and column)"
                .into(),
        ));
    }
    let max = max_encrypted_side();
    if d > max {
        return Err(AppError::Invalid(format!(
            "a {d} x {d} matrix packs in D^2 = {}^2 slots (d padded to a power of two), more \
             than the N/2 slots of any supported ring (N <= 2^{}): use d <= {max}, or split \
             the matrices into blocks of at most {max} x {max}",
            padded(d),
            heloom_ckks::params::MAX_LOG_N
        )));
    }
    Ok(())
}

/// The most slots (`N/2`) a ring over the chain `moduli` can have: every prime is 1 mod `2N`
/// (the NTT needs it), so `2N` divides each `q - 1`. An upper bound, not `N` itself (a prime
/// may also be 1 mod `4N`); `None` for an empty chain.
fn max_slots_of(moduli: &[u64]) -> Option<usize> {
    let v = moduli
        .iter()
        .map(|&q| q.saturating_sub(1).trailing_zeros())
        .min()?
        .min(heloom_ckks::params::MAX_LOG_N + 1);
    Some(1usize << v.saturating_sub(2))
}

/// The rotation steps (Galois keys, besides the relinearization key) a tenant generates to
/// run [`matmul_encrypted_graph`] for `d x d` matrices: sorted, without repeats, in
/// `0..D^2` as the graph uses them (a right rotation by `k` is the step `D^2 - k`). These are
/// [`crate::matmul::jiang::rotation_steps`], about `4 sqrt(D)` steps: the JKLS18 product
/// with baby-step giant-step shares one set of keys between its stages. Refuses `d = 0` and
/// sides no supported ring packs.
pub fn matmul_encrypted_rotations(d: usize) -> Result<Vec<i64>> {
    check_encrypted_side(d)?;
    Ok(jiang::rotation_steps(d))
}

/// JKLS18's product with its masks as slot values, for any [`PolyOps`] backend: the
/// computation of [`crate::matmul::jiang::JiangMultiplier::multiply`] (same masks, rotation
/// steps, products, rescales), one operation at a time instead of spread over threads (a
/// graph gets its parallelism from the scheduler).
#[derive(Clone, Debug)]
struct EncryptedProduct {
    /// The packed side `D`.
    size: usize,
    /// Baby steps `g`; `h = D / g` giant steps.
    baby: usize,
    masks: Masks<Vec<f64>>,
}

/// `acc + x`, or `x` when `acc` is empty.
fn add_into<O: PolyOps>(ops: &O, acc: &mut Option<O::Ct>, x: O::Ct) -> heloom_ckks::Result<()> {
    *acc = Some(match acc.take() {
        Some(y) => ops.add(&y, &x)?,
        None => x,
    });
    Ok(())
}

impl EncryptedProduct {
    fn new(d: usize) -> Result<Self> {
        let size = padded(d);
        Ok(Self {
            size,
            baby: jiang::baby(d),
            masks: jiang::group_masks(size * size, jiang::masks(d))?,
        })
    }

    /// `ct` and its rotations by `unit * b` for `b = 1 .. g-1`, in order of `b`.
    fn with_babies<O: PolyOps>(
        &self,
        ops: &O,
        ct: &O::Ct,
        unit: usize,
    ) -> heloom_ckks::Result<Vec<O::Ct>> {
        let steps: Vec<i64> = (1..self.baby).map(|b| (unit * b) as i64).collect();
        let mut out = Vec::with_capacity(self.baby);
        out.push(ct.clone());
        out.extend(ops.rotate_many(ct, &steps)?);
        Ok(out)
    }

    /// `sigma` (`unit = 1`) or `tau` (`unit = D`) of `ct` by baby-step giant-step, rescaled:
    /// `sum_giant rot(sum_b mask ⊙ rot(ct, unit b), giant)`.
    fn linear<O: PolyOps>(
        &self,
        ops: &O,
        ct: &O::Ct,
        groups: &jiang::Groups<Vec<f64>>,
        unit: usize,
    ) -> heloom_ckks::Result<O::Ct> {
        let babies = self.with_babies(ops, ct, unit)?;
        let mut acc: Option<O::Ct> = None;
        for (giant, terms) in groups {
            let mut inner: Option<O::Ct> = None;
            for (b, values) in terms {
                let x = babies.get(*b).ok_or_else(|| {
                    CkksError::InvalidInput(format!("internal: baby step {b} not computed"))
                })?;
                add_into(ops, &mut inner, ops.multiply_plain_slots(x, values)?)?;
            }
            let Some(mut inner) = inner else { continue };
            if *giant != 0 {
                inner = ops.rotate(&inner, *giant)?;
            }
            add_into(ops, &mut acc, inner)?;
        }
        let acc =
            acc.ok_or_else(|| CkksError::InvalidInput("internal: empty linear transform".into()))?;
        ops.rescale(&acc)
    }

    /// `A B` (see [`crate::matmul::jiang`]'s module docs): `A0 = sigma(A)`, `B0 = tau(B)`;
    /// per baby step `b` and giant step `a` the term
    /// `[rot(m_k, -g a) ⊙ rot(A0, b) + rot(m'_k, -g a) ⊙ rot(A0', b)] ⊙ rot(rot(B0, D b), (D - 1) g a)`
    /// (`k = g a + b`, `A0' = rot(A0, -D)`; `k = 0`: `A0` times the exact integer
    /// `q_{L-1}`), summed per `a`, relinearized, rotated by `g a`, summed, rescaled twice.
    fn apply_on<O: PolyOps>(&self, ops: &O, a: &O::Ct, b: &O::Ct) -> heloom_ckks::Result<O::Ct> {
        let (size, g) = (self.size, self.baby);
        let h = size / g;
        let a0 = self.linear(ops, a, &self.masks.sigma, 1)?;
        let b0 = self.linear(ops, b, &self.masks.tau, size)?;
        let a0p = ops.rotate(&a0, canonical(-(size as i64), size * size))?;
        let a_babies = self.with_babies(ops, &a0, 1)?;
        let ap_babies = self.with_babies(ops, &a0p, 1)?;
        let b_babies = self.with_babies(ops, &b0, size)?;
        // rot(B0, D k - g a) = rot(rot(B0, D b), (D - 1) g a) for 1 <= a < h.
        let steps: Vec<i64> = (1..h).map(|a| ((size - 1) * g * a) as i64).collect();
        let mut sums: Vec<Option<O::Ct>> = vec![None; h];
        for bb in 0..g {
            let b0b = &b_babies[bb];
            let brots = ops.rotate_many(b0b, &steps)?;
            for (a, sum) in sums.iter_mut().enumerate() {
                let k = g * a + bb;
                let lhs = if k == 0 {
                    // phi^0(A0) = A0, times the exact integer q_{L-1}: the masked terms' scale.
                    ops.multiply_const(&a_babies[0], 1.0)?
                } else {
                    let (m, m2) = self.masks.shifts.get(k - 1).ok_or_else(|| {
                        CkksError::InvalidInput(format!("internal: no shift mask for k = {k}"))
                    })?;
                    let x = ops.multiply_plain_slots(&a_babies[bb], m)?;
                    let y = ops.multiply_plain_slots(&ap_babies[bb], m2)?;
                    ops.add(&x, &y)?
                };
                let rhs = if a == 0 { b0b } else { &brots[a - 1] };
                add_into(ops, sum, ops.multiply(&lhs, rhs)?)?;
            }
        }
        let mut acc: Option<O::Ct> = None;
        for (a, s) in sums.into_iter().enumerate() {
            let Some(s) = s else { continue };
            let mut x = ops.relinearize(&s)?;
            if a > 0 {
                x = ops.rotate(&x, (g * a) as i64)?;
            }
            add_into(ops, &mut acc, x)?;
        }
        let acc =
            acc.ok_or_else(|| CkksError::InvalidInput("internal: no product terms".into()))?;
        // The deferred rescales: the shift masks', then the product's.
        ops.rescale(&ops.rescale(&acc)?)
    }
}

/// The graph of JKLS18's encrypted `d x d` times encrypted `d x d` product, so that a server
/// runs it through the runtime's scheduler. Input 0 is `A`, input 1 is `B`: ciphertexts at
/// `level` (at least [`MATMUL_ENCRYPTED_LEVELS`]) with `scale` over the chain `moduli`, each
/// encrypting exactly the `D^2` values of [`crate::matmul::jiang::pack_matrix`]
/// (`D = padded(d)`, so that rotations wrap at `D^2`; the graph cannot see a ciphertext's slot
/// count, a wider packing gives a wrong result). The one output is `A B` (two polynomials),
/// [`MATMUL_ENCRYPTED_LEVELS`] levels lower, with scale
/// `scale^2 / q_{level-2}`; read it with [`crate::matmul::jiang::unpack_matrix`].
///
/// The masks, rotations, products and rescales of
/// [`crate::matmul::jiang::JiangMultiplier::multiply`] (same key switches; the graph rotates
/// one step at a time where the eager product hoists the baby steps), so the result is word
/// for word the in-process one. Needs the relinearization key and the Galois keys of
/// [`matmul_encrypted_rotations`]. Refuses `d = 0`, a level below
/// [`MATMUL_ENCRYPTED_LEVELS`] or beyond the chain, and a `D^2` above the slots the chain's
/// primes allow.
pub fn matmul_encrypted_graph(
    d: usize,
    moduli: &[u64],
    level: usize,
    scale: f64,
) -> Result<TaskGraph> {
    check_encrypted_side(d)?;
    let size = padded(d);
    let period = size * size;
    if let Some(slots) = max_slots_of(moduli) {
        if period > slots {
            return Err(AppError::Invalid(format!(
                "a {d} x {d} matrix packs in {size}^2 = {period} slots (d padded to a power of \
                 two), but a ring over these primes has at most {slots} (N/2): use parameters \
                 with a larger N or d <= {}",
                1usize << (slots.trailing_zeros() / 2)
            )));
        }
    }
    let top = moduli.len().saturating_sub(1);
    if level < MATMUL_ENCRYPTED_LEVELS || level > top || moduli.is_empty() {
        return Err(AppError::Invalid(format!(
            "the encrypted matrix product uses {MATMUL_ENCRYPTED_LEVELS} levels; inputs at \
             level {level} cannot be used on a chain of {} primes (levels \
             {MATMUL_ENCRYPTED_LEVELS}..={top} can): encrypt A and B at such a level, with \
             parameters of at least {MATMUL_ENCRYPTED_LEVELS} levels above q_0",
            moduli.len()
        )));
    }
    let product = EncryptedProduct::new(d)?;
    let b = GraphBuilder::new(format!("matmul-encrypted-{d}"), moduli);
    let x = b.input(level, scale)?;
    let y = b.input(level, scale)?;
    let out = product.apply_on(&b, &x, &y)?;
    Ok(b.finish(&[out])?)
}

/// The rotation steps `graph` uses, sorted, without repeats: the Galois keys (besides the
/// relinearization key, see [`needs_relinearization`]) a tenant must generate to run it.
pub fn required_rotations(graph: &TaskGraph) -> Vec<i64> {
    let mut s: Vec<i64> = graph
        .nodes()
        .iter()
        .filter_map(|n| match n.op {
            NodeOp::Rotate(_, step) => Some(step),
            _ => None,
        })
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// Whether `graph` relinearizes (needs the relinearization key).
pub fn needs_relinearization(graph: &TaskGraph) -> bool {
    let nodes = graph.nodes();
    nodes.iter().any(|n| match n.op {
        NodeOp::Relinearize(a) => nodes.get(a).is_some_and(|x| x.size > 2),
        _ => false,
    })
}

/// Multiplicative levels CryptoNets uses with `packing` (the inputs' level must be at least
/// this; the logits come out this many levels lower).
pub fn cryptonets_levels(packing: Packing) -> usize {
    match packing {
        Packing::Batch => batch::LEVELS,
        Packing::Single => single::LEVELS,
    }
}

/// Input ciphertexts a CryptoNets job with `packing` takes: one per pixel (784) for batch
/// packing, one per image for single-image packing.
pub fn cryptonets_inputs(packing: Packing) -> usize {
    match packing {
        Packing::Batch => PIXELS,
        Packing::Single => 1,
    }
}

/// The rotation steps [`cryptonets_graph`] uses for `net` with `packing` (none for batch
/// packing; the conv folds, the dense layers' baby and giant steps and folds for single).
pub fn cryptonets_rotations(net: &CryptoNet, packing: Packing) -> Result<Vec<i64>> {
    match packing {
        Packing::Batch => Ok(Vec::new()),
        Packing::Single => {
            let (d1, d2) = single_dense(net)?;
            let mut s: Vec<i64> = d1.used_steps();
            s.extend(d2.used_steps());
            for (step, until) in [
                (BLOCK, SINGLE_SLOTS),
                (D1_COLS, SINGLE_SLOTS),
                (D1_ROWS, D1_COLS),
                (D2_ROWS, D1_ROWS),
            ] {
                s.extend(fold_steps(step, until).map(|x| x as i64));
            }
            s.sort_unstable();
            s.dedup();
            Ok(s)
        }
    }
}

/// The CryptoNets graph of `net` with `packing`, for inputs at `level` with `scale` on the
/// chain `moduli` (the level must be at least [`cryptonets_levels`]; parameters as
/// [`crate::cryptonets::evaluate::params`]: primes of the scale's size).
///
/// - Batch: [`cryptonets_inputs`] = 784 inputs (pixel `p` of every image, image `s` in slot
///   `s`: [`batch_inputs`]); 10 outputs (logit `k` of image `s` in slot `s`, three
///   polynomials: [`batch_logits`]). Integer weights as exact constant products, as
///   [`crate::cryptonets::linear::combine`] computes them.
/// - Single: one input of [`SINGLE_SLOTS`] slots ([`single_input`]); one output, logit `k` in
///   slot `k` ([`single_logits`]).
pub fn cryptonets_graph(
    net: &CryptoNet,
    packing: Packing,
    moduli: &[u64],
    level: usize,
    scale: f64,
) -> Result<TaskGraph> {
    let need = cryptonets_levels(packing);
    if level < need {
        return Err(AppError::Invalid(format!(
            "CryptoNets with {packing:?} packing uses {need} levels; the inputs are at level \
             {level}: use parameters with at least {need} levels above q_0 (as \
             heloom_apps::cryptonets::evaluate::params) and fresh ciphertexts"
        )));
    }
    match packing {
        Packing::Batch => batch_graph(net, moduli, level, scale),
        Packing::Single => single_graph(net, moduli, level, scale),
    }
}

/// One output's terms: `(input, weight)`, zero weights left out.
type Rows = Vec<Vec<(usize, f64)>>;

/// The convolution over the 28 x 28 pixels (the padding row and column are zero and have no
/// ciphertext), one row per output `(m, i, j)`.
fn conv_rows(net: &CryptoNet) -> Rows {
    let mut rows = vec![Vec::new(); HIDDEN];
    for m in 0..CONV_MAPS {
        for i in 0..CONV_OUT {
            for j in 0..CONV_OUT {
                let row = &mut rows[(m * CONV_OUT + i) * CONV_OUT + j];
                for ky in 0..KERNEL {
                    for kx in 0..KERNEL {
                        let (r, c) = (STRIDE * i + ky, STRIDE * j + kx);
                        let w = net.conv_w[(m * KERNEL + ky) * KERNEL + kx];
                        if r < SIDE && c < SIDE && w != 0.0 {
                            row.push((r * SIDE + c, w));
                        }
                    }
                }
            }
        }
    }
    const { assert!(PADDED == SIDE + 1) };
    rows
}

/// A dense row-major `rows x cols` matrix as rows of non-zero terms.
fn dense_rows(w: &[f64], rows: usize, cols: usize) -> Result<Rows> {
    if w.len() != rows * cols {
        return Err(AppError::Invalid(format!(
            "{} weights for a {rows} x {cols} layer",
            w.len()
        )));
    }
    Ok(w.chunks_exact(cols)
        .map(|r| {
            r.iter()
                .enumerate()
                .filter(|(_, &v)| v != 0.0)
                .map(|(t, &v)| (t, v))
                .collect()
        })
        .collect())
}

/// One batch-packed linear layer, as [`crate::cryptonets::linear::combine`] and
/// `BatchNet::linear`: each output the exact sum of `round(w * q_l) * x_t`, at scale
/// `scale * q_l`, then `rescales` rescales and the bias.
fn batch_linear(
    b: &GraphBuilder,
    inputs: &[Value],
    rows: &Rows,
    bias: &[f64],
    rescales: usize,
) -> Result<Vec<Value>> {
    let first = inputs
        .first()
        .ok_or_else(|| AppError::Invalid("a linear layer needs inputs".into()))?;
    let q = b.moduli()[first.level] as f64;
    rows.iter()
        .zip(bias)
        .map(|(row, &bias)| {
            let mut acc: Option<Value> = None;
            for &(t, w) in row {
                let k = (w * q).round();
                if !k.is_finite() || k.abs() >= 2f64.powi(100) {
                    return Err(AppError::Invalid(format!(
                        "weight {w} cannot be encoded at multiplier 2^{:.1}",
                        q.log2()
                    )));
                }
                let x = &inputs[t];
                let m = b.multiply_const_exact(x, k as i128)?;
                let m = b.with_scale(m, x.scale * q)?;
                acc = Some(match acc {
                    Some(a) => b.add(&a, &m)?,
                    None => m,
                });
            }
            let mut out = match acc {
                Some(a) => a,
                None => {
                    let z = b.multiply_const_exact(first, 0)?;
                    b.with_scale(z, first.scale * q)?
                }
            };
            for _ in 0..rescales {
                out = b.rescale(&out)?;
            }
            Ok(b.add_const(&out, bias)?)
        })
        .collect()
}

/// `BatchNet::infer` as a graph: conv, square (no relinearization, no rescale), dense with
/// two rescales and a relinearization, square and rescale, dense.
fn batch_graph(net: &CryptoNet, moduli: &[u64], level: usize, scale: f64) -> Result<TaskGraph> {
    let b = GraphBuilder::new("cryptonets-batch", moduli);
    let px = (0..PIXELS)
        .map(|_| b.input(level, scale))
        .collect::<heloom_ckks::Result<Vec<_>>>()?;
    let conv_b: Vec<f64> = (0..HIDDEN)
        .map(|o| net.conv_b[o / (CONV_OUT * CONV_OUT)])
        .collect();
    let conv = batch_linear(&b, &px, &conv_rows(net), &conv_b, 1)?;
    let sq = conv
        .iter()
        .map(|c| b.square(c))
        .collect::<heloom_ckks::Result<Vec<_>>>()?;
    let fc1 = dense_rows(&net.fc1_w, FC1, HIDDEN)?;
    let d = batch_linear(&b, &sq, &fc1, &net.fc1_b, 2)?;
    let sq = d
        .iter()
        .map(|x| b.rescale(&b.square(&b.relinearize(x)?)?))
        .collect::<heloom_ckks::Result<Vec<_>>>()?;
    let fc2 = dense_rows(&net.fc2_w, CLASSES, FC1)?;
    let out = batch_linear(&b, &sq, &fc2, &net.fc2_b, 1)?;
    Ok(b.finish(&out)?)
}

/// Steps `step, 2 step, 4 step, ...` below `until` (a rotate-and-sum).
fn fold_steps(step: usize, until: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(step), |s| s.checked_mul(2)).take_while(move |&s| s < until)
}

/// Sum of `ct` rotated by [`fold_steps`].
fn fold(b: &GraphBuilder, mut ct: Value, step: usize, until: usize) -> Result<Value> {
    for s in fold_steps(step, until) {
        let r = b.rotate(&ct, s as i64)?;
        ct = b.add(&ct, &r)?;
    }
    Ok(ct)
}

/// A single-image dense layer as a `rows x cols` Halevi-Shoup product over [`SINGLE_SLOTS`]
/// (input of period `cols`, outputs folded over row blocks afterwards): diagonals
/// `d_i[s] = m(s mod rows, (s mod cols + i) mod cols)`, as `single::dense`, with the bias in
/// padding column `bias_col` (see the module docs).
fn single_layer(
    (rows, cols, baby): (usize, usize, usize),
    m: impl Fn(usize, usize) -> f64,
    bias: &[f64],
    bias_col: usize,
) -> Result<Diagonals> {
    let rowsum: Vec<f64> = (0..rows)
        .map(|r| (0..cols).map(|c| m(r, c)).sum())
        .collect();
    let full = |r: usize, c: usize| {
        if c == bias_col {
            bias.get(r).copied().unwrap_or(0.0) - rowsum[r]
        } else {
            m(r, c)
        }
    };
    Diagonals::new(SINGLE_SLOTS, rows, baby, |i| {
        (0..SINGLE_SLOTS)
            .map(|s| full(s % rows, (s % cols + i) % cols))
            .collect()
    })
}

/// The two dense layers of the single-image packing, biases included.
fn single_dense(net: &CryptoNet) -> Result<(Diagonals, Diagonals)> {
    let mut col_of = vec![usize::MAX; D1_COLS];
    for h in 0..HIDDEN {
        col_of[slot_of_hidden(h)] = h;
    }
    // Column 255 (block 0 past its 169 outputs) holds no hidden unit; column 127 no dense-1
    // output.
    let (c1, c2) = (BLOCK - 1, D1_ROWS - 1);
    if col_of[c1] != usize::MAX || c2 < FC1 {
        return Err(AppError::Invalid("internal: bias column in use".into()));
    }
    let d1 = single_layer(
        (D1_ROWS, D1_COLS, D1_BABY),
        |r, c| {
            if r < FC1 && col_of[c] != usize::MAX {
                net.fc1_w[r * HIDDEN + col_of[c]]
            } else {
                0.0
            }
        },
        &net.fc1_b,
        c1,
    )?;
    let d2 = single_layer(
        (D2_ROWS, D1_ROWS, D2_BABY),
        |r, c| {
            if r < CLASSES && c < FC1 {
                net.fc2_w[r * FC1 + c]
            } else {
                0.0
            }
        },
        &net.fc2_b,
        c2,
    )?;
    Ok((d1, d2))
}

/// `SingleNet::infer` as a graph (biases as in the module docs).
fn single_graph(net: &CryptoNet, moduli: &[u64], level: usize, scale: f64) -> Result<TaskGraph> {
    let b = GraphBuilder::new("cryptonets-single", moduli);
    let x = b.input(level, scale)?;
    // 1-2: per map, the kernel weights block by block, folded over the 32 blocks, the bias,
    // the mask keeping block m.
    let mut h: Option<Value> = None;
    for m in 0..CONV_MAPS {
        let mut w = vec![0.0; SINGLE_SLOTS];
        for k in 0..KPOS {
            w[k * BLOCK..k * BLOCK + MAP].fill(net.conv_w[m * KPOS + k]);
        }
        let mut mask = vec![0.0; SINGLE_SLOTS];
        mask[m * BLOCK..m * BLOCK + MAP].fill(1.0);
        let c = b.rescale(&b.multiply_plain_slots(&x, &w)?)?;
        let c = fold(&b, c, BLOCK, SINGLE_SLOTS)?;
        let c = b.add_const(&c, net.conv_b[m])?;
        let c = b.multiply_plain_slots(&c, &mask)?;
        h = Some(match h {
            Some(a) => b.add(&a, &c)?,
            None => c,
        });
    }
    let h = h.ok_or_else(|| AppError::Invalid("no maps".into()))?;
    let h = b.rescale(&h)?;
    // 3: square.
    let h = b.rescale(&b.relinearize(&b.square(&h)?)?)?;
    // 4: dense 845 -> 100 on the 2048-periodic input (+1 for the bias column), fold.
    let (d1, d2) = single_dense(net)?;
    let h = fold(&b, h, D1_COLS, SINGLE_SLOTS)?;
    let h = b.add_const(&h, 1.0)?;
    let d = b.rescale(&d1.apply_on(&b, &h)?)?;
    let d = fold(&b, d, D1_ROWS, D1_COLS)?;
    // 5: square.
    let d = b.rescale(&b.relinearize(&b.square(&d)?)?)?;
    // 6: dense 100 -> 10 on the 128-periodic input (+1 for the bias column), fold.
    let d = b.add_const(&d, 1.0)?;
    let z = b.rescale(&d2.apply_on(&b, &d)?)?;
    let z = fold(&b, z, D2_ROWS, D1_ROWS)?;
    Ok(b.finish(&[z])?)
}

/// Client side, batch packing: the values of the 784 pixel ciphertexts (input `p` holds
/// pixel `p` of image `s` in slot `s`, scaled to `[0, 1]`), for 1 to `N/2` images.
pub fn batch_inputs(images: &[&[u8]]) -> Result<Vec<Vec<f64>>> {
    if images.is_empty() {
        return Err(AppError::Invalid("a batch holds at least one image".into()));
    }
    if let Some(bad) = images.iter().position(|im| im.len() != PIXELS) {
        return Err(AppError::Invalid(format!(
            "image {bad} has {} pixels, not {PIXELS}",
            images[bad].len()
        )));
    }
    Ok((0..PIXELS)
        .map(|p| images.iter().map(|im| im[p] as f64 / 255.0).collect())
        .collect())
}

/// Client side, batch packing: the logits of the first `count` images from the ten decrypted
/// outputs.
pub fn batch_logits(decrypted: &[Vec<f64>], count: usize) -> Result<Vec<[f64; CLASSES]>> {
    if decrypted.len() != CLASSES {
        return Err(AppError::Invalid(format!(
            "{} decrypted outputs; a batch CryptoNets job returns {CLASSES}",
            decrypted.len()
        )));
    }
    if let Some(short) = decrypted.iter().find(|v| v.len() < count) {
        return Err(AppError::Invalid(format!(
            "an output holds {} slots, fewer than the {count} images asked for",
            short.len()
        )));
    }
    Ok((0..count)
        .map(|s| std::array::from_fn(|k| decrypted[k][s]))
        .collect())
}

/// Client side, single-image packing: the [`SINGLE_SLOTS`] values to encrypt (the image in
/// im2col form: block `ky * 5 + kx` holds at `i * 13 + j` the pixel under that kernel
/// position for output `(i, j)`).
pub fn single_input(image: &[u8]) -> Result<Vec<f64>> {
    single::im2col(image, SINGLE_SLOTS)
}

/// Client side, single-image packing: the ten logits (slots `0..10` of the decrypted output).
pub fn single_logits(decrypted: &[f64]) -> Result<[f64; CLASSES]> {
    if decrypted.len() < CLASSES {
        return Err(AppError::Invalid(format!(
            "the decrypted output holds {} slots; the logits need {CLASSES}",
            decrypted.len()
        )));
    }
    Ok(std::array::from_fn(|k| decrypted[k]))
}

/// The predicted class of each image's logits.
pub fn classes(logits: &[[f64; CLASSES]]) -> Vec<usize> {
    logits
        .iter()
        .map(|l| crate::cryptonets::model::argmax(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_steps_and_rotations() {
        assert_eq!(
            fold_steps(256, 8192).collect::<Vec<_>>(),
            [256, 512, 1024, 2048, 4096]
        );
        assert_eq!(fold_steps(16, 128).collect::<Vec<_>>(), [16, 32, 64]);
        let net = CryptoNet::random(3);
        let s = cryptonets_rotations(&net, Packing::Single).expect("steps");
        assert_eq!(s, single::rotation_steps());
        assert!(cryptonets_rotations(&net, Packing::Batch)
            .expect("steps")
            .is_empty());
    }
}
