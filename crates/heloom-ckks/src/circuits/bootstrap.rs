//! CKKS bootstrapping (Cheon, Han, Kim, Kim, Song, "Bootstrapping for approximate homomorphic
//! encryption", Eurocrypt 2018; CHKKS18 below): a ciphertext at level 0 comes back at a
//! higher level holding the same values.
//!
//! With `t(X) = c_0 + c_1 s` over the integers, decryption at level 0 is `m = t mod q_0`. The
//! steps, for full packing (`N/2` slots):
//!
//! 1. **ModRaise**: the level-0 polynomials, read as centred integers, are put in the whole
//!    chain. The ciphertext then decrypts to `t = m + q_0 I`, with `I` a small integer
//!    polynomial (`|I| <~ sqrt((h+1)/12)` per coefficient for a secret of Hamming weight `h`).
//!    Labelled with scale `q_0`, its slots would be `U_0 y` with `y = (t_lo + i t_hi) / q_0`,
//!    where `U_0[j][k] = zeta^(5^j k)` is the decoding matrix on the complex coefficient vector
//!    (CKKS17 Sec. 3.3; the encoder's slot convention). It is labelled with EvalMod's scale
//!    `S_e` (its primes' size) instead and CoeffToSlot multiplies by `S_e / q_0`: EvalMod then
//!    runs at about `2^60` whatever `q_0` is. What reaches the output is EvalMod's error times
//!    the message ratio `q_0 / Delta`, so the message should sit close to `q_0`; the sine's
//!    cubic term (below) pushes the other way. Optionally the level-0 message is first
//!    multiplied by an integer that brings it to `q_0 / 2^r` (Lattigo's message ratio): with
//!    a 60-bit `q_0` the key switch back from the sparse secret, whose noise is absolute, stays
//!    far below it (measured at N = 2^16: `r = 4` with a 60-bit `q_0` and the arcsine gave
//!    27.6 bits worst and 29.7 mean, against 24.4 and 26.3 for `q_0 / Delta = 2^8` without).
//! 2. **CoeffToSlot**: `U_0^-1 = (2/N) U_0^H` (the canonical embedding of a real polynomial is
//!    inverted by its conjugate transpose), so a transform by `(1/N) U_0^H` gives `y / 2`, and
//!    a conjugation splits it: `Re y = a + conj(a)`, `Im y = i (conj(a) - a)`. The slots now
//!    hold the coefficients `t_k / q_0 = I_k + m_k / q_0` (CHKKS18 Sec. 4.1), divided by `K`
//!    (in the last stage's diagonals) so that EvalMod's Chebyshev variable needs no level of
//!    its own.
//! 3. **EvalMod**: `(1/2pi) sin(2 pi x)` is `x - I` up to `O((m/q_0)^3)`, so a Chebyshev
//!    approximation of it on `[-K, K]` (`K` bounding `|I|`) leaves `m_k / q_0` (CHKKS18 Sec.
//!    4.2; Chebyshev interpolation as in Chen, Chillotti, Song, Eurocrypt 2019). Optionally
//!    the polynomial approximates `cos(2 pi (x - 1/4) / 2^r)` and `r` double angles
//!    (`cos 2a = 2 cos^2 a - 1`) bring it to `sin(2 pi x)`. An optional arcsine correction
//!    (the Taylor polynomial of `arcsin(2 pi y) / (2 pi)`, CHKKS18 Sec. 4.2) removes the cubic
//!    term, which lets the message sit at `q_0 / 2^4`. Setting the scale to the input's `Delta`
//!    makes the slots `m_k / Delta` (the `2 pi`, the message factor and the squarings' scale
//!    drift are folded into SlotToCoeff).
//! 4. **SlotToCoeff**: `w = re + i im` and a transform by `U_0` gives back the slots; the
//!    constant factor of step 3 is spread over its stages.
//!
//! Both transforms are factored: `U_0 = F_(L/2) ... F_1 BR` with `F_h` the special FFT's
//! butterfly layers (three diagonals each) and `BR` the bit reversal, which both transforms
//! leave out (EvalMod between them works slot by slot, so the slots may stay bit-reversed).
//! The `log2(L)` layers are merged into a chosen number of levels (the level budget); each
//! merged group is one [`LinearTransform`] over its few diagonals, baby-step giant-step with
//! hoisted baby rotations. EvalMod uses the polynomial's depth. The EvalMod levels
//! want primes near `q_0` (the scale there is `q_0`), CoeffToSlot a large prime (its diagonals
//! are `zeta / N`), SlotToCoeff one near `Delta`.

use crate::ciphertext::Ciphertext;
use crate::circuits::lintrans::LinearTransform;
use crate::circuits::polynomial::{evaluate_polynomial_on, PolyBasis};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::evaluator::Evaluator;
use crate::keys::{KeyGenerator, SecretKey, SwitchingKey};
use crate::params::CkksParameters;
use crate::polyops::PolyOps;
use heloom_math::{Form, Word};
use heloom_pool::Threads;
use num_complex::Complex64;
use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::sync::Arc;
use std::time::Instant;

/// Settings of a [`Bootstrapper`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootstrapConfig {
    /// Half-width `K` of the interval EvalMod approximates on: it must bound `|I|`, whose
    /// coefficients are sums of `h + 1` uniform terms (`h` the secret's Hamming weight).
    pub k: f64,
    /// Degree of EvalMod's Chebyshev approximation on `[-K, K]`: of `sin(2 pi x) / (2 pi)`,
    /// or with double angles of `cos(2 pi (x - 1/4) / 2^r)`.
    pub degree: usize,
    /// Double-angle steps `r` (`cos 2a = 2 cos^2 a - 1`, each one level): the polynomial then
    /// approximates a cosine of `2^r` times lower frequency, so a much lower degree suffices
    /// and the Chebyshev recurrence amplifies its rounding noise far less (CHKKS18 Sec. 4.2;
    /// Han-Ki 2020). 0: the sine directly.
    pub double_angle: u32,
    /// Levels CoeffToSlot uses: its `log2(N/2)` butterfly stages merged into this many
    /// transforms (more levels, fewer diagonals and rotations per level).
    pub cts_levels: usize,
    /// Levels SlotToCoeff uses, likewise.
    pub stc_levels: usize,
    /// Fewer Galois keys for more rotations: each transform's baby steps come from keys for
    /// power-of-two steps only, one rotation after another instead of hoisted from one
    /// decomposition ([`LinearTransform::with_fewer_keys`]). At N = 2^16: 15 rotation keys
    /// instead of 27 (2.2 GB instead of 3.9), the transforms about a third slower. The
    /// memory-lean setting also runs EvalMod's two halves one after the other on any thread
    /// budget ([`Bootstrapper::eval_mod_pair`]).
    pub fewer_keys: bool,
    /// Degree of the arcsine correction after the sine (odd, 0 for none): the Taylor
    /// polynomial of `arcsin(2 pi y) / (2 pi)` turns EvalMod's `sin(2 pi x) / (2 pi)` back into
    /// `x - I` up to `O(x^(d + 2))` instead of `O(x^3)` (CHKKS18 Sec. 4.2; Lee et al.,
    /// "High-precision bootstrapping of RNS-CKKS", 2020). The message may then sit much closer
    /// to `q_0` (`q_0 / Delta` of `2^4` instead of `2^8`), which divides EvalMod's rounding
    /// error, as seen in the output, by as much: about 4 more bits for 2 levels at degree 3.
    pub arcsine_degree: usize,
    /// `log2` of the message ratio `q_0 / Delta'` ModRaise works at, 0 to keep the input's
    /// (`q_0 / Delta`). Otherwise the level-0 ciphertext is first multiplied by the integer
    /// `n = 2^k` that brings the nominal scale `Delta` (the parameters') to `q_0 / 2^r`: exact, no
    /// level. A large `q_0` (60 bits) then keeps the key switch back from the sparse secret,
    /// whose noise is absolute, far below the message (Lattigo's `LogMessageRatio`; Bossuat et
    /// al. 2022), while the small ratio keeps EvalMod's error small in the output. Needs the
    /// arcsine correction below about `2^6`.
    pub message_ratio_bits: u32,
    /// The transforms' diagonals stored compactly ([`LinearTransform::with_compact_diagonals`]:
    /// one word per coefficient instead of one per prime, expanded at each use). Memory for
    /// time with every key kept: at N = 2^16 about 3 GB less for one NTT per diagonal and
    /// prime in each bootstrap. The same result, word for word.
    pub compact_diagonals: bool,
}

impl BootstrapConfig {
    /// Settings for a secret of Hamming weight `h`: `K` the smallest integer with
    /// `P(|I_k| > K) <= 2^-50` for each coefficient ([`Self::failure_log2`]; a coefficient past
    /// `K` would come out wrong, so at most `2^-34` per bootstrap at N = 2^16), the sine
    /// directly (no double angle: at `q_0 / Delta = 2^10` it was as precise as three double
    /// angles, 24.4 against 24.1 bits worst at N = 2^14 and K = 25, with one level less), and
    /// the lowest degree that resolves its `2K` periods ([`Self::degree_for`]). For `h = 32`:
    /// `K = 12` (`2^-55.7` per coefficient, `2^-39.7` per bootstrap at N = 2^16), degree 127.
    pub fn for_hamming_weight(h: usize) -> Self {
        let mut k = 4.0;
        while Self::failure_log2(h, k) > -50.0 {
            k += 1.0;
        }
        let double_angle = 0;
        Self {
            k,
            degree: Self::degree_for(k, double_angle),
            double_angle,
            cts_levels: 3,
            stc_levels: 3,
            fewer_keys: false,
            compact_diagonals: false,
            arcsine_degree: 0,
            message_ratio_bits: 0,
        }
    }

    /// `log2` of the probability that one coefficient of `I` has `|I_k| > K` for a secret of
    /// Hamming weight `h`: `I_k` is the rounding of `h + 1` independent uniform terms on
    /// `[-1/2, 1/2)` (`c_0 / q_0` and the `c_1 s / q_0` products), an Irwin-Hall sum. Exact
    /// (its lower tail `sum_j (-1)^j C(n, j) (a - j)^n / n!`, terms falling fast) far in the
    /// tail; elsewhere the sub-Gaussian bound `2 exp(-6 t^2 / n)`, an upper bound.
    pub fn failure_log2(h: usize, k: f64) -> f64 {
        let n = (h + 1) as f64;
        // |I_k| > K when the sum reaches K + 1/2.
        let t = k.floor() + 0.5;
        let a = n / 2.0 - t;
        if a <= 0.0 {
            return f64::NEG_INFINITY;
        }
        let bound = 1.0 - 6.0 * t * t / n / std::f64::consts::LN_2;
        if a > n / 4.0 {
            return bound;
        }
        // C(n, j) / n! = 1 / (j! (n - j)!).
        let ln_fact = |m: f64| (1..=m as u64).map(|i| (i as f64).ln()).sum::<f64>();
        let mut sum = 0.0;
        let mut j = 0.0;
        while j <= a.floor() {
            let term = (n * (a - j).ln() - ln_fact(j) - ln_fact(n - j)).exp();
            sum += if (j as u64).is_multiple_of(2) {
                term
            } else {
                -term
            };
            j += 1.0;
        }
        if sum <= 0.0 {
            return bound;
        }
        (2.0 * sum).log2().min(bound)
    }

    /// The lowest degree `2^j - 1` (the baby-step giant-step evaluation's best shapes) whose
    /// Chebyshev interpolation on `[-1, 1]` of EvalMod's function for `K` and `r` double angles
    /// leaves out coefficients of at most `2^-48` each (they fall super-exponentially past the
    /// function's frequency, so their sum is about the first; far below EvalMod's rounding):
    /// `sin(2 pi K y) / (2 pi)`, or `cos(2 pi (K y - 1/4) / 2^r)`. 127 for `K` up to 13.
    pub fn degree_for(k: f64, double_angle: u32) -> usize {
        let r = f64::from(1u32 << double_angle.min(20));
        let f = |y: f64| {
            if double_angle == 0 {
                (2.0 * PI * k * y).sin() / (2.0 * PI)
            } else {
                (2.0 * PI * (k * y - 0.25) / r).cos()
            }
        };
        // Computed in f64 to about 2^-51 each at this width.
        let wide = 1023;
        let c = chebyshev_coefficients(f, -1.0, 1.0, wide);
        let mut d = 7;
        while d < wide {
            let tail = c[d + 1..].iter().map(|x| x.abs()).fold(0.0, f64::max);
            if tail <= 2f64.powi(-48) {
                return d;
            }
            d = 2 * d + 1;
        }
        wide
    }

    /// Levels bootstrapping uses: CoeffToSlot, EvalMod's depth, SlotToCoeff.
    pub fn depth(&self) -> usize {
        self.cts_levels + self.eval_mod_depth() + self.stc_levels
    }

    /// Prime sizes of an experimental chain for these settings: `q_0`, the computation's
    /// primes (`computation`, lowest first), SlotToCoeff's at 45 bits, EvalMod's and
    /// CoeffToSlot's at 60 (the layout of [`preset`], for test and benchmark chains).
    pub fn chain_bits(&self, q0: u32, computation: &[u32]) -> Vec<u32> {
        let mut bits = vec![q0];
        bits.extend_from_slice(computation);
        bits.extend(std::iter::repeat_n(45, self.stc_levels));
        bits.extend(std::iter::repeat_n(
            60,
            self.eval_mod_depth() + self.cts_levels,
        ));
        bits
    }

    /// EvalMod's depth: its Chebyshev polynomial (on `[-1, 1]`: CoeffToSlot divides by `K`),
    /// the double angles and the arcsine correction.
    pub fn eval_mod_depth(&self) -> usize {
        crate::evaluator::Evaluator::<u64>::polynomial_depth(
            self.degree,
            PolyBasis::Chebyshev { a: -1.0, b: 1.0 },
        ) + self.double_angle as usize
            + self.arcsine_depth()
    }

    /// Levels of the arcsine correction (0 without one).
    pub fn arcsine_depth(&self) -> usize {
        if self.arcsine_degree == 0 {
            0
        } else {
            crate::evaluator::Evaluator::<u64>::polynomial_depth(
                self.arcsine_degree,
                PolyBasis::Power,
            )
        }
    }
}

/// A bootstrappable parameter set: the chain, bootstrapping's settings and the sparse
/// secret's Hamming weight for encapsulation ([`sparse_secret_keys`]).
#[derive(Clone, Debug)]
pub struct BootstrapPreset {
    /// The parameters: a dense ternary secret, 128-bit secure by the HE standard's table.
    pub params: CkksParameters,
    /// Bootstrapping's settings (its `K` from the sparse secret's weight).
    pub config: BootstrapConfig,
    /// Hamming weight of the sparse secret ModRaise runs under.
    pub sparse_weight: usize,
    /// Levels left for the computation after a bootstrap (each at the scale `2^40`).
    pub levels_left: usize,
}

/// The preset for `N = 2^log_n`, 15 or 16, both 128-bit secure by the HE standard's table with a
/// dense ternary secret; ModRaise under a sparse secret of weight 32 (`K = 12`, a degree-127
/// sine over 8 levels, CoeffToSlot mapping `[-K, K]` to `[-1, 1]`).
///
/// - `2^16`: `q_0` of 60 bits, 9 computation levels of 45 bits (scale `2^45`), SlotToCoeff 3
///   levels of 45 bits, EvalMod 10 of 60 bits (the sine, then a degree-3 arcsine correction),
///   CoeffToSlot 3 of 60 bits, 6 special primes of 61 bits (`dnum` 5): `log QP` 1746 of the
///   table's 1747. ModRaise scales the message to `q_0 / 2^4` first
///   ([`BootstrapConfig::message_ratio_bits`]). Measured on an Intel Xeon (Emerald Rapids) over
///   all slots of uniform complex inputs: 27.5 bits worst, 29.4 mean with `K = 12` (27.6 / 29.7
///   with `K = 10`; 24.4 / 26.3 with the message at `q_0 / 2^8`, `q_0` of 53 bits and no
///   arcsine: the sine's cubic term then kept the message far from `q_0`, and EvalMod's error
///   came out multiplied by `2^8`).
/// - `2^15`: `q_0` of 53 bits (`q_0 / Delta = 2^8`), 1 computation level, CoeffToSlot and
///   SlotToCoeff 2 levels each, EvalMod and CoeffToSlot on 57-bit primes, 2 special primes
///   (`dnum` 7), no room for the arcsine's levels: `log QP` 880 of 881. 22.1 bits worst, 24.0
///   mean (EvalMod's rounding at a 57-bit scale limits it; 50-bit primes gave 15.9 / 17.9).
///
/// Smaller rings are refused with the reason.
pub fn preset(log_n: u32) -> Result<BootstrapPreset> {
    let sparse_weight = 32;
    let mut config = BootstrapConfig::for_hamming_weight(sparse_weight);
    // (q_0 bits, levels left, StC prime bits, EvalMod prime bits, CtS prime bits, special primes)
    let (q0_bits, levels_left, stc_bits, eval_bits, cts_bits, special) = match log_n {
        16 => {
            config.arcsine_degree = 3;
            config.message_ratio_bits = 4;
            (60, 9, 45, 60, 60, 6)
        }
        15 => {
            config.cts_levels = 2;
            config.stc_levels = 2;
            (53, 1, 45, 57, 57, 2)
        }
        _ => {
            return Err(CkksError::InvalidParameters(format!(
                "no bootstrappable preset for N = 2^{log_n}: bootstrapping takes about 13 levels of its own, which fit 128-bit security only from N = 2^15 (the HE standard allows 881 bits of modulus there and 438 at 2^14); use log_n = 15 (1 level left) or 16 (9 levels left)"
            )))
        }
    };
    let mut bits = vec![q0_bits];
    bits.extend(std::iter::repeat_n(45, levels_left));
    bits.extend(std::iter::repeat_n(stc_bits, config.stc_levels));
    bits.extend(std::iter::repeat_n(eval_bits, config.eval_mod_depth()));
    bits.extend(std::iter::repeat_n(cts_bits, config.cts_levels));
    // 61-bit special primes: P then exceeds the largest digit (six 60-bit primes at 2^16) by
    // 2^6, which keeps key switching's noise near its rounding instead of sigma sqrt(N) =
    // 2^10. That noise lands on t = m + q_0 I at the top level, and 2^10 of it cost 5 bits
    // (18.8 against 24 bits worst, measured with q_0 of 53 bits).
    let params = CkksParameters::builder(1 << log_n)
        .prime_bits(bits)
        .scale_bits(45)
        .special_bits(61)
        .special_count(special)
        .build()?;
    Ok(BootstrapPreset {
        params,
        config,
        sparse_weight,
        levels_left,
    })
}

/// The keys of sparse-secret encapsulation (Bossuat, Troncoso-Pastoriza, Hubaux, "Bootstrapping
/// for approximate homomorphic encryption with negligible failure-probability by using
/// sparse-secret encapsulation", ACNS 2022): the computation keeps its dense (ternary) secret
/// `s`, and only bootstrapping's ModRaise sees a sparse one `s'` of Hamming weight `h'`, so
/// `I` stays small (`K` from `h'`) without weakening the main key.
///
/// - `to_sparse` switches from `s` to `s'` at level 0 only: its limbs exist modulo `q_0` and
///   the special primes (`q_0 P`, about 110 bits) and are zero elsewhere. An RLWE sample with
///   a sparse secret is safe at that small modulus; over the whole chain it would not be.
/// - `from_sparse` switches back from `s'` to `s` over the whole chain: an encryption of `s'`
///   under the dense `s`, as secure as any other evaluation key.
///
/// Made on the client, from the secret key ([`sparse_secret_keys`]); public, like the other
/// evaluation keys.
#[derive(Clone, Debug)]
pub struct SparseKeys<W: Word> {
    /// Hamming weight `h'` of the sparse secret.
    pub hamming_weight: usize,
    /// From the dense secret to the sparse one, at level 0.
    pub to_sparse: SwitchingKey<W>,
    /// From the sparse secret back to the dense one, at every level.
    pub from_sparse: SwitchingKey<W>,
}

/// Generates [`SparseKeys`] for `sk` with a fresh sparse secret of Hamming weight `h` (drawn
/// from the operating system's CSPRNG, used here and dropped).
pub fn sparse_secret_keys<W: Word>(
    ctx: &Arc<Context<W>>,
    sk: &SecretKey<W>,
    h: usize,
) -> Result<SparseKeys<W>> {
    ctx.check_fingerprint(sk.fingerprint, "secret key")?;
    let n = ctx.n();
    if h == 0 || h > n {
        return Err(CkksError::InvalidInput(format!(
            "the sparse secret's Hamming weight must be 1..={n}; got {h}"
        )));
    }
    let mut rng = crate::keys::os_rng();
    let coeffs: Vec<i64> = heloom_math::sampler::ternary_hamming(&mut rng, n, h)?
        .into_iter()
        .map(i64::from)
        .collect();
    let sparse = SecretKey::from_coefficients(ctx, &coeffs)?;
    // s -> s': keep only q_0 and the special primes.
    let mut to_sparse = KeyGenerator::from_secret_key(ctx, &sparse)?.switching_key(&sk.s)?;
    let top = ctx.max_level();
    for b in &mut to_sparse.b {
        for i in 1..=top {
            b.limb_mut(i).fill(W::ZERO);
        }
    }
    let from_sparse = KeyGenerator::from_secret_key(ctx, sk)?.switching_key(&sparse.s)?;
    Ok(SparseKeys {
        hamming_weight: h,
        to_sparse,
        from_sparse,
    })
}

/// Bootstraps full-packing ciphertexts of one parameter set (see the module docs). Cheap to
/// clone: the encoded transforms are shared.
#[derive(Clone, Debug)]
pub struct Bootstrapper<W: Word> {
    ctx: Arc<Context<W>>,
    config: BootstrapConfig,
    /// CoeffToSlot: `(1/N) U_0^H` without its bit reversal, as `cts_levels` transforms from
    /// the top level down.
    cts: Arc<[LinearTransform<W>]>,
    /// SlotToCoeff: `U_0` without its bit reversal, as `stc_levels` transforms from the level
    /// EvalMod leaves.
    stc: Arc<[LinearTransform<W>]>,
    /// EvalMod's Chebyshev coefficients on `[-1, 1]` (CoeffToSlot divides by `K`).
    coeffs: Vec<f64>,
    /// The arcsine correction's power-basis coefficients (empty without one).
    arcsine: Vec<f64>,
    /// The scale EvalMod runs at (the raised ciphertext's label).
    eval_scale: f64,
    /// The integer ModRaise first multiplies by ([`BootstrapConfig::message_ratio_bits`]).
    message_factor: u64,
    /// Sparse-secret encapsulation, when used.
    sparse: Option<Arc<SparseKeys<W>>>,
    /// The slot count bootstrapped (`N/2`: full packing).
    slots: usize,
}

/// A matrix on `L` slots by its generalized diagonals: offset `i` -> `diag_i`, where
/// `(M v)[t] = sum_i diag_i[t] v[(t + i) mod L]` (the form [`LinearTransform`] takes).
type Diags = BTreeMap<usize, Vec<Complex64>>;

/// The root of the special FFT's layer `h` for pair `j`: `exp(2 pi i (5^j mod 8h) / 8h)` (the
/// encoder's, [`crate::encoder`]).
fn layer_root(h: usize, j: usize) -> Complex64 {
    let m = 8 * h as u64;
    let mut g = 1u64;
    for _ in 0..j {
        g = g * 5 % m;
    }
    Complex64::from_polar(1.0, 2.0 * PI * g as f64 / m as f64)
}

/// Layer `h` of the special FFT on `l` slots as a matrix (CKKS17's decoding direction): on each
/// pair `(p, q = p + h)` of a block of `2h`, `(u, v) -> (u + c v, u - c v)`, or with `inverse`
/// its inverse `(x, y) -> ((x + y) / 2, (x - y) conj(c) / 2)`. Three diagonals: `0`, `h` and
/// `l - h` (one when `h = l/2`). The decoding matrix is `U_0 = F_(l/2) ... F_1 BR`, `BR` the
/// bit reversal; bootstrapping leaves `BR` out of both transforms, since EvalMod between them
/// works slot by slot (CHKKS18 Sec. 4.1; Lattigo's homomorphic DFT does the same).
fn butterfly_stage(l: usize, h: usize, inverse: bool) -> Diags {
    let zero = Complex64::new(0.0, 0.0);
    let mut d0 = vec![zero; l];
    let mut up = vec![zero; l];
    let mut down = vec![zero; l];
    for s in (0..l).step_by(2 * h) {
        for j in 0..h {
            let (p, q) = (s + j, s + j + h);
            let c = layer_root(h, j);
            if inverse {
                let half = Complex64::new(0.5, 0.0);
                d0[p] = half;
                up[p] = half;
                down[q] = c.conj() * 0.5;
                d0[q] = -c.conj() * 0.5;
            } else {
                d0[p] = Complex64::new(1.0, 0.0);
                up[p] = c;
                down[q] = Complex64::new(1.0, 0.0);
                d0[q] = -c;
            }
        }
    }
    let mut m = Diags::new();
    m.insert(0, d0);
    if h == l - h {
        for (u, d) in up.iter_mut().zip(&down) {
            *u += d;
        }
        m.insert(h, up);
    } else {
        m.insert(h, up);
        m.insert(l - h, down);
    }
    m
}

/// `A B` (B applied first): `diag_((i + j) mod L) += a_i * rot(b_j, i)`.
fn compose(a: &Diags, b: &Diags, l: usize) -> Diags {
    let mut out = Diags::new();
    for (&i, ai) in a {
        for (&j, bj) in b {
            let d = out
                .entry((i + j) % l)
                .or_insert_with(|| vec![Complex64::new(0.0, 0.0); l]);
            for t in 0..l {
                d[t] += ai[t] * bj[(t + i) % l];
            }
        }
    }
    out
}

fn scale_diags(m: &mut Diags, f: f64) {
    for d in m.values_mut() {
        for x in d {
            *x *= f;
        }
    }
}

/// How a transform of sparse-packing bootstrapping on `n` slots is applied: as it is, or widened
/// to `2n` slots, where the real and imaginary halves of `n` complex coefficients share one
/// ciphertext (so one EvalMod serves both, as in Lattigo's sparse bootstrapping).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lift {
    /// The transform as it is, on `n` slots.
    None,
    /// On `2n` slots, reading the lower half and writing `A x_lo` to the lower half, zero to
    /// the upper ([`lift_low_half`]): CoeffToSlot's last level (its input is `n`-periodic) and
    /// SlotToCoeff's first (its input holds `x_lo = r + i s` in the lower half).
    LowHalf,
}

/// `A` (on `n` slots) as a transform on `2n` slots: row `t < n` reads the lower half's copy
/// of each column, rows `t >= n` are zero. An entry `(t, u)` of `A` lands on offset
/// `u - t mod 2n`; for the butterfly stages next to the data (small `h`), whose blocks never
/// wrap around, these are `A`'s own centred offsets, so the rotations (and keys) stay `A`'s.
fn lift_low_half(a: &Diags, n: usize) -> Diags {
    let two = 2 * n;
    let mut out = Diags::new();
    for (&o, d) in a {
        for (t, &x) in d.iter().enumerate().take(n) {
            if x.norm() == 0.0 {
                continue;
            }
            let u = (t + o) % n;
            let off = (u + two - t) % two;
            out.entry(off)
                .or_insert_with(|| vec![Complex64::new(0.0, 0.0); two])[t] += x;
        }
    }
    out
}

/// The product of `stages` (applied in order) split into `levels` consecutive groups as even as
/// possible, each encoded as one transform, the first at `top`, the next one level below.
#[allow(clippy::too_many_arguments)]
fn merged<W: Word>(
    ctx: &Arc<Context<W>>,
    stages: &[Diags],
    l: usize,
    levels: usize,
    top: usize,
    config: &BootstrapConfig,
    threads: Threads,
    lift: impl Fn(usize) -> Lift,
) -> Result<Vec<LinearTransform<W>>> {
    let mut out = Vec::with_capacity(levels);
    let mut start = 0;
    for g in 0..levels {
        let end = stages.len() * (g + 1) / levels;
        let mut m = stages[start].clone();
        for st in &stages[start + 1..end] {
            m = compose(st, &m, l);
        }
        let (period, mut m) = match lift(g) {
            Lift::None => (l, m),
            Lift::LowHalf => (2 * l, lift_low_half(&m, l)),
        };
        m.retain(|_, d| d.iter().any(|x| x.norm() > 1e-300));
        let offsets: Vec<usize> = m.keys().copied().collect();
        let empty = Vec::new();
        let t = LinearTransform::new_sparse_complex(
            ctx,
            period,
            &offsets,
            top - g,
            |o| m.get(&o).unwrap_or(&empty).clone(),
            threads,
        )?
        .with_fewer_keys(config.fewer_keys);
        // Compacted level by level: only one level's NTT-form diagonals are alive at once.
        out.push(if config.compact_diagonals {
            t.with_compact_diagonals(ctx)?
        } else {
            t
        });
        start = end;
    }
    Ok(out)
}

/// The Taylor polynomial of degree `d` (odd; empty for 0) of `arcsin(w y) / (2 pi)` in `y`:
/// the arcsine correction for a sine output `sin(2 pi x) / w`.
fn arcsine_coefficients(d: usize, w: f64) -> Vec<f64> {
    if d == 0 {
        return Vec::new();
    }
    let mut c = vec![0.0; d + 1];
    // arcsin u = sum_n (2n)! / (4^n (n!)^2 (2n + 1)) u^(2n + 1).
    let mut a = 1.0;
    for n in 0..=(d - 1) / 2 {
        if n > 0 {
            a *= (2 * n - 1) as f64 / (2 * n) as f64;
        }
        let j = 2 * n + 1;
        c[j] = a / j as f64 * w.powi(j as i32) / (2.0 * PI);
    }
    c
}

/// The integer `2^k` that brings `scale` nearest to `q_0 / 2^ratio_bits` (1 for `ratio_bits` 0
/// or a scale already there).
fn message_factor(q0: u64, scale: f64, ratio_bits: u32) -> f64 {
    if ratio_bits == 0 {
        return 1.0;
    }
    let k = ((q0 as f64).log2() - scale.log2()).round() as i64 - i64::from(ratio_bits);
    2f64.powi(k.clamp(0, 40) as i32)
}

/// Chebyshev interpolation coefficients of `f` on `[a, b]` at `degree + 1` Chebyshev nodes
/// (`sum_k c_k T_k(y)`, `y` the point mapped to `[-1, 1]`).
pub fn chebyshev_coefficients(f: impl Fn(f64) -> f64, a: f64, b: f64, degree: usize) -> Vec<f64> {
    let n = degree + 1;
    let fx: Vec<f64> = (0..n)
        .map(|j| {
            let y = (PI * (j as f64 + 0.5) / n as f64).cos();
            f(0.5 * (b - a) * y + 0.5 * (b + a))
        })
        .collect();
    (0..n)
        .map(|k| {
            let s: f64 = fx
                .iter()
                .enumerate()
                .map(|(j, v)| v * (PI * k as f64 * (j as f64 + 0.5) / n as f64).cos())
                .sum();
            let c = 2.0 * s / n as f64;
            if k == 0 {
                c / 2.0
            } else {
                c
            }
        })
        .collect()
}

impl<W: Word> Bootstrapper<W> {
    /// Precomputes the transforms and EvalMod's polynomial for `ctx` (encodings split over
    /// `threads`). The chain must have `2 + depth` levels above the output level, `depth` being
    /// EvalMod's ([`Evaluator::polynomial_depth`] of `config.degree`).
    pub fn new(ctx: &Arc<Context<W>>, config: BootstrapConfig, threads: Threads) -> Result<Self> {
        Self::with_slots(ctx, config, ctx.n() / 2, threads)
    }

    /// [`Self::new`] for ciphertexts of `slots` slots: `N/2` is full packing; fewer is sparse
    /// packing (a power of two with at least `2^max(cts_levels, stc_levels)` slots), where the
    /// raised ciphertext is first projected onto the slots' subring (`log2(N / (2 slots))`
    /// rotations), the homomorphic DFTs have `log2(slots)` stages instead of `log2(N/2)`, and
    /// one EvalMod serves the real and the imaginary halves together, packed side by side in
    /// `2 slots` slots (two for full packing). Bootstraps only ciphertexts of that slot count.
    pub fn with_slots(
        ctx: &Arc<Context<W>>,
        config: BootstrapConfig,
        slots: usize,
        threads: Threads,
    ) -> Result<Self> {
        let full_slots = ctx.n() / 2;
        let min_stages = config.cts_levels.max(config.stc_levels);
        if !slots.is_power_of_two() || slots > full_slots || slots < (1 << min_stages.min(30)) {
            return Err(CkksError::InvalidInput(format!(
                "bootstrapping handles a power-of-two slot count from 2^{min_stages} (one butterfly stage per CoeffToSlot / SlotToCoeff level) to N/2 = {full_slots}; got {slots}"
            )));
        }
        if !(config.k.is_finite() && config.k >= 1.0) || config.degree < 3 {
            return Err(CkksError::InvalidInput(format!(
                "bootstrapping needs K >= 1 and a degree >= 3; got K = {}, degree {}",
                config.k, config.degree
            )));
        }
        if config.arcsine_degree != 0
            && (config.arcsine_degree.is_multiple_of(2) || config.arcsine_degree > 15)
        {
            return Err(CkksError::InvalidInput(format!(
                "the arcsine correction's degree must be 0 (none) or odd up to 15; got {}",
                config.arcsine_degree
            )));
        }
        let stages = slots.trailing_zeros() as usize;
        if config.cts_levels == 0
            || config.stc_levels == 0
            || config.cts_levels > stages
            || config.stc_levels > stages
        {
            return Err(CkksError::InvalidInput(format!(
                "CoeffToSlot and SlotToCoeff take 1..={stages} levels each (the {stages} butterfly stages of {} slots); got {} and {}",
                slots,
                config.cts_levels,
                config.stc_levels
            )));
        }
        let top = ctx.max_level();
        let depth = config.eval_mod_depth();
        let needed = config.depth();
        if top < needed {
            return Err(CkksError::OutOfLevels {
                level: top,
                needed,
                hint: format!(
                    "bootstrapping uses {needed} levels here (CoeffToSlot {}, EvalMod {depth}, SlotToCoeff {}) and the chain has {top}; use a bootstrappable parameter set with more levels",
                    config.cts_levels, config.stc_levels
                ),
            });
        }
        let sparse_packing = slots < full_slots;
        // The projection onto the subring multiplies the coefficients by N / (2 slots).
        let gap = (full_slots / slots) as f64;
        // CoeffToSlot: F_(L/2)^-1 first, down to F_1^-1; the 1/2 of y/2 in the first stage.
        let mut inverse: Vec<Diags> = (0..stages)
            .rev()
            .map(|k| butterfly_stage(slots, 1 << k, true))
            .collect();
        // EvalMod runs at the scale of its own primes, S_e (about q_l there), whatever q_0 is:
        // ModRaise labels the raised ciphertext with S_e, so its slots are U_0 (q_0 / S_e) x,
        // and CoeffToSlot multiplies by S_e / q_0 to leave x. A q_0 only a little above the
        // scale then keeps EvalMod's error from being multiplied by q_0 / Delta.
        let q = ctx.params().moduli();
        let q0 = q[0] as f64;
        let eval_scale = q[top - config.cts_levels] as f64;
        let message_factor = message_factor(q[0], ctx.params().scale(), config.message_ratio_bits);
        // The 1 / K that maps [-K, K] to EvalMod's Chebyshev interval [-1, 1] rides along
        // too: a multiplication by a constant there would cost a level.
        scale_diags(&mut inverse[0], 0.5 * eval_scale / (q0 * gap));
        // On the last stage: the earlier stages' rounding then stays relative to x, not x / K.
        scale_diags(&mut inverse[stages - 1], 1.0 / config.k);
        let last_cts = config.cts_levels - 1;
        let cts = merged(
            ctx,
            &inverse,
            slots,
            config.cts_levels,
            top,
            &config,
            threads,
            |g| {
                if sparse_packing && g == last_cts {
                    Lift::LowHalf
                } else {
                    Lift::None
                }
            },
        )?;
        // SlotToCoeff: F_1 first, up to F_(L/2).
        let forward: Vec<Diags> = (0..stages)
            .map(|k| butterfly_stage(slots, 1 << k, false))
            .collect();
        let stc_top = top - config.cts_levels - depth;
        // EvalMod's output is sin(2 pi x) / (2 pi) = m / q_0 at scale S_e; with double angles
        // sin(2 pi x) at the scale S' each squaring moved from S_e to S^2 / q_l. Labelled with
        // the input's scale Delta its slots are (S_e or S' / 2 pi) m / (q_0 Delta) * q_0, so
        // SlotToCoeff takes q_0 / S_e (or q_0 / (2 pi S')): the output then has the input's
        // scale exactly (with the message factor n: q_0 / (n S_e)).
        let mut forward = forward;
        // The output factor (about 2^-8 to 2^-12, also undoing the message factor) spread over
        // every stage: on the last stage alone its diagonals would be encoded with that many
        // bits fewer (measured: 2^-25 against 2^-28 error), on the first the slots would shrink
        // before the rest of the transform's roundings (18.9 bits worst).
        let spread = |forward: &mut Vec<Diags>, f: f64| {
            let per = f.powf(1.0 / forward.len() as f64);
            for st in forward.iter_mut() {
                scale_diags(st, per);
            }
        };
        // With the arcsine correction the output is x - I itself at the sine's output scale
        // (the correction keeps its input's scale).
        let k = config.k;
        let asin = config.arcsine_degree != 0;
        let (coeffs, arcsine) = if config.double_angle == 0 {
            spread(&mut forward, 0.5 * q0 / (eval_scale * message_factor));
            let c = chebyshev_coefficients(
                |y| (2.0 * PI * k * y).sin() / (2.0 * PI),
                -1.0,
                1.0,
                config.degree,
            );
            (c, arcsine_coefficients(config.arcsine_degree, 2.0 * PI))
        } else {
            let mut scale = eval_scale;
            let mut level = stc_top + config.arcsine_depth() + config.double_angle as usize;
            for _ in 0..config.double_angle {
                scale = scale * scale / q[level] as f64;
                level -= 1;
            }
            let two_pi = if asin { 1.0 } else { 2.0 * PI };
            spread(&mut forward, 0.5 * q0 / (scale * two_pi * message_factor));
            let r = f64::from(1u32 << config.double_angle);
            let c = chebyshev_coefficients(
                |y| (2.0 * PI * (k * y - 0.25) / r).cos(),
                -1.0,
                1.0,
                config.degree,
            );
            (c, arcsine_coefficients(config.arcsine_degree, 1.0))
        };
        let stc = merged(
            ctx,
            &forward,
            slots,
            config.stc_levels,
            stc_top,
            &config,
            threads,
            |g| {
                if sparse_packing && g == 0 {
                    Lift::LowHalf
                } else {
                    Lift::None
                }
            },
        )?;
        Ok(Self {
            ctx: Arc::clone(ctx),
            config,
            cts: cts.into(),
            stc: stc.into(),
            coeffs,
            arcsine,
            eval_scale,
            message_factor: message_factor as u64,
            sparse: None,
            slots,
        })
    }

    /// Bootstraps with sparse-secret encapsulation: ModRaise runs under the sparse secret of
    /// `keys` (so the config's `K` should come from its Hamming weight,
    /// [`BootstrapConfig::for_hamming_weight`]), the rest under the key set's own secret.
    pub fn with_sparse_keys(mut self, keys: Arc<SparseKeys<W>>) -> Result<Self> {
        for k in [&keys.to_sparse, &keys.from_sparse] {
            self.ctx
                .check_fingerprint(k.fingerprint(), "sparse-secret switching key")?;
        }
        self.sparse = Some(keys);
        Ok(self)
    }

    /// Whether sparse-secret encapsulation keys are attached ([`Self::with_sparse_keys`]).
    pub fn has_sparse_keys(&self) -> bool {
        self.sparse.is_some()
    }

    /// The scale EvalMod runs at (the raised ciphertext's label, about its primes' size).
    pub fn eval_scale(&self) -> f64 {
        self.eval_scale
    }

    /// The integer ModRaise multiplies the level-0 message by
    /// ([`BootstrapConfig::message_ratio_bits`]; 1 when off).
    pub fn message_factor(&self) -> u64 {
        self.message_factor
    }

    fn check_full_packing(&self, what: &str) -> Result<()> {
        if self.slots < self.ctx.n() / 2 {
            return Err(CkksError::InvalidInput(format!(
                "{what} is the full-packing phase; this bootstrapper packs {} slots sparsely (use bootstrap or bootstrap_timed)",
                self.slots
            )));
        }
        Ok(())
    }

    /// The slot count this bootstrapper handles (`N/2`: full packing).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The settings.
    pub fn config(&self) -> BootstrapConfig {
        self.config
    }

    /// The level a bootstrapped ciphertext comes out at.
    pub fn output_level(&self) -> usize {
        self.stc.last().map_or(0, |t| t.level() - 1)
    }

    /// Bytes held by the encoded CoeffToSlot and SlotToCoeff diagonals.
    pub fn memory_bytes(&self) -> usize {
        self.cts
            .iter()
            .chain(self.stc.iter())
            .map(LinearTransform::memory_bytes)
            .sum()
    }

    /// The rotation steps whose Galois keys bootstrapping needs (conjugation too: generate the
    /// key set with `conjugate = true`).
    pub fn rotation_steps(&self) -> Vec<i64> {
        let mut s: Vec<i64> = self
            .cts
            .iter()
            .chain(self.stc.iter())
            .flat_map(|t| t.used_steps())
            .collect();
        let full = self.ctx.n() / 2;
        if self.slots < full {
            // The subring projection's steps and the packing of the imaginary half.
            let mut step = self.slots;
            while step < full {
                s.push(step as i64);
                step *= 2;
            }
            s.push(-(self.slots as i64));
        }
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Refuses a ciphertext scale ModRaise cannot take: with a message factor above 1 the scaled
    /// message must stay a small fraction of `q_0` (EvalMod's sine is `x - I` only near the
    /// integers). Every backend's ModRaise checks it.
    pub fn check_raise_scale(&self, scale: f64) -> Result<()> {
        let q0 = self.ctx.params().moduli()[0];
        if self.message_factor > 1 && scale * self.message_factor as f64 > q0 as f64 / 8.0 {
            return Err(CkksError::InvalidInput(format!(
                "the ciphertext's scale 2^{:.1} is too large for this bootstrapper: it scales messages by 2^{:.0} for a ratio q_0 / scale of 2^{} (q_0 = 2^{:.1}); bootstrap ciphertexts at the parameters' scale 2^{:.1}",
                scale.log2(),
                (self.message_factor as f64).log2(),
                self.config.message_ratio_bits,
                (q0 as f64).log2(),
                self.ctx.params().scale().log2()
            )));
        }
        Ok(())
    }

    /// CoeffToSlot's transforms, from the top level down (full packing: `(1/N) U_0^H`; sparse
    /// packing: the last one lifted to `2n` slots). Other backends apply them with
    /// [`LinearTransform::apply_with`].
    pub fn coeffs_to_slots_transforms(&self) -> &[LinearTransform<W>] {
        &self.cts
    }

    /// SlotToCoeff's transforms, from the level EvalMod leaves down.
    pub fn slots_to_coeffs_transforms(&self) -> &[LinearTransform<W>] {
        &self.stc
    }

    /// The context (parameters) the bootstrapper was built for.
    pub fn context(&self) -> &Arc<Context<W>> {
        &self.ctx
    }

    /// The sparse-secret encapsulation keys, when set ([`Self::with_sparse_keys`]).
    pub fn sparse_keys(&self) -> Option<&Arc<SparseKeys<W>>> {
        self.sparse.as_ref()
    }

    /// ModRaise: `ct` (dropped to level 0) with its polynomials lifted, as centred integers,
    /// to the whole chain, and labelled with EvalMod's scale (CoeffToSlot accounts for it). It
    /// decrypts to `m + q_0 I`.
    pub fn mod_raise(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let mut low = ev.drop_to_level(ct, 0)?;
        if low.size() != 2 {
            return Err(CkksError::InvalidInput(format!(
                "bootstrapping takes a ciphertext of 2 polynomials; this one has {} (relinearize it first)",
                low.size()
            )));
        }
        let q0 = self.ctx.params().moduli()[0];
        self.check_raise_scale(low.scale())?;
        if self.message_factor > 1 {
            low = ev.multiply_const_exact(&low, i128::from(self.message_factor))?;
        }
        if let Some(sp) = &self.sparse {
            // Under s' from here to the switch back below.
            low = self.switch(ev, &low, &sp.to_sparse)?;
        }
        let b0 = self.ctx.q_basis(0)?;
        let top = self.ctx.max_level();
        let bl = self.ctx.q_basis(top)?;
        let half = q0 / 2;
        let mut polys = Vec::with_capacity(2);
        for p in low.polys() {
            let mut c = p.clone();
            if c.form() == Form::Ntt {
                b0.inverse(&mut c)?;
            }
            let signed: Vec<i64> = c
                .limb(0)
                .iter()
                .map(|w| {
                    let v = w.to_u64();
                    if v > half {
                        -((q0 - v) as i64)
                    } else {
                        v as i64
                    }
                })
                .collect();
            let mut lifted = bl.poly_from_signed(&signed)?;
            bl.forward(&mut lifted)?;
            polys.push(lifted);
        }
        let raised = self
            .ctx
            .ciphertext_from_polys(polys, top, self.eval_scale, low.slots())?;
        match &self.sparse {
            Some(sp) => self.switch(ev, &raised, &sp.from_sparse),
            None => Ok(raised),
        }
    }

    /// `(c_0, c_1)` switched under `key`: `(c_0 + ks_0(c_1), ks_1(c_1))`.
    fn switch(
        &self,
        ev: &Evaluator<W>,
        ct: &Ciphertext<W>,
        key: &SwitchingKey<W>,
    ) -> Result<Ciphertext<W>> {
        let level = ct.level();
        let basis = self.ctx.q_basis(level)?;
        let (mut c0, c1) =
            self.ctx
                .key_switch_with(&ct.polys()[1], level, key, ev.threads().effective())?;
        basis.add_assign(&mut c0, &ct.polys()[0])?;
        self.ctx
            .ciphertext_from_polys(vec![c0, c1], level, ct.scale(), ct.slots())
    }

    /// EvalMod, for slots in `[-K, K]`: `(1/2pi) sin(2 pi x)` in every slot; with double
    /// angles `sin(2 pi x)` at the scale the squarings leave (SlotToCoeff accounts for both).
    /// The result's scale is still the input's: [`Self::bootstrap`] re-labels it.
    pub fn eval_mod(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        // Each product's rescale merged into its relinearization's mod-down.
        self.eval_mod_on(&ev.with_merged_rescale(true), ct)
    }

    /// [`Self::eval_mod`] on any [`PolyOps`] backend (the GPU's evaluator): the same circuit.
    pub fn eval_mod_on<O: PolyOps>(&self, ops: &O, ct: &O::Ct) -> Result<O::Ct> {
        let scale = ops.scale_of(ct);
        let mut c = evaluate_polynomial_on(
            ops,
            ct,
            &self.coeffs,
            PolyBasis::Chebyshev { a: -1.0, b: 1.0 },
        )?;
        for _ in 0..self.config.double_angle {
            let sq = ops.relinearize(&ops.square(&c)?)?;
            let sq = ops.multiply_int(&sq, 2)?;
            c = ops.rescale(&ops.add_const(&sq, -1.0)?)?;
        }
        if !self.arcsine.is_empty() {
            c = evaluate_polynomial_on(ops, &c, &self.arcsine, PolyBasis::Power)?;
        }
        ops.with_scale(c, scale)
    }

    /// [`Self::eval_mod`], then made real: `2 Re = v + conj(v)` (the noise's imaginary parts
    /// would otherwise turn into real errors when the halves are recombined; the 2 is in
    /// SlotToCoeff).
    pub fn eval_mod_real(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        let m = self.eval_mod(ev, ct)?;
        ev.add(&m, &ev.conjugate(&m)?)
    }

    /// [`Self::eval_mod_real`] on CoeffToSlot's two halves. From two threads the two run side by side, each on half of
    /// `ev`'s threads (their polynomial evaluation has few parallel parts of its own), except
    /// with [`BootstrapConfig::fewer_keys`], the memory-lean setting, where they run one after
    /// the other (only one half's powers alive). Scales as [`Self::eval_mod`].
    pub fn eval_mod_pair(
        &self,
        ev: &Evaluator<W>,
        re: &Ciphertext<W>,
        im: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, Ciphertext<W>)> {
        let real = |e: &Evaluator<W>, v: &Ciphertext<W>| self.eval_mod_real(e, v);
        if ev.threads().effective().get() < 2 || self.config.fewer_keys {
            // On two threads of an Intel Xeon (Emerald Rapids), side by side took 6.4-7.2 s
            // against 8.3-8.8 s one after the other at N = 2^16 (each key switch split over
            // both threads scales worse than two whole ones), for about 0.5 GB more memory.
            return Ok((real(ev, re)?, real(ev, im)?));
        }
        let (re, im) = ev.threads().effective().join(
            |t| real(&ev.with_threads(t), re),
            |t| real(&ev.with_threads(t), im),
        );
        Ok((re?, im?))
    }

    /// CoeffToSlot on a raised ciphertext: `(Re y, Im y)`, the coefficients of `t / q_0`.
    pub fn coeffs_to_slots(
        &self,
        ev: &Evaluator<W>,
        raised: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, Ciphertext<W>)> {
        self.check_full_packing("coeffs_to_slots")?;
        let mut a = raised.clone();
        for t in self.cts.iter() {
            a = t.apply_rescaled(ev, &a)?;
        }
        let ac = ev.conjugate(&a)?;
        let re = ev.add(&a, &ac)?;
        let im = ev.multiply_by_i(&ev.sub(&ac, &a)?)?;
        Ok((re, im))
    }

    /// SlotToCoeff: the slots of `U_0 (re + i im)`.
    pub fn slots_to_coeffs(
        &self,
        ev: &Evaluator<W>,
        re: &Ciphertext<W>,
        im: &Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        self.check_full_packing("slots_to_coeffs")?;
        let mut w = ev.add(re, &ev.multiply_by_i(im)?)?;
        for t in self.stc.iter() {
            w = t.apply_rescaled(ev, &w)?;
        }
        Ok(w)
    }

    /// Bootstraps `ct` (full packing, `N/2` slots, 2 polynomials, any level): the same values
    /// at [`Self::output_level`], with `ct`'s scale. `ev` needs the relinearization key, the
    /// conjugation key and the Galois keys of [`Self::rotation_steps`].
    pub fn bootstrap(&self, ev: &Evaluator<W>, ct: &Ciphertext<W>) -> Result<Ciphertext<W>> {
        Ok(self.bootstrap_timed(ev, ct)?.0)
    }

    /// [`Self::bootstrap`], with the wall time of each phase.
    pub fn bootstrap_timed(
        &self,
        ev: &Evaluator<W>,
        ct: &Ciphertext<W>,
    ) -> Result<(Ciphertext<W>, BootstrapTimes)> {
        let slots = self.slots;
        if ct.slots() != slots {
            return Err(CkksError::InvalidInput(format!(
                "this bootstrapper handles ciphertexts of {slots} slots; this one holds {} (make one with Bootstrapper::with_slots for that count: the slot count shapes the transforms and keys)",
                ct.slots()
            )));
        }
        let scale = ct.scale();
        let mut times = BootstrapTimes::default();
        let t = Instant::now();
        let raised = self.mod_raise(ev, ct)?;
        times.mod_raise_s = t.elapsed().as_secs_f64();
        if slots < self.ctx.n() / 2 {
            return self.bootstrap_sparse(ev, raised, scale, times);
        }
        let t = Instant::now();
        let (re, im) = self.coeffs_to_slots(ev, &raised)?;
        times.coeffs_to_slots_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (mut re, mut im) = self.eval_mod_pair(ev, &re, &im)?;
        times.eval_mod_s = t.elapsed().as_secs_f64();
        // The slots hold m_k / q_0 at scale q_0: at scale Delta they are m_k / Delta.
        re.set_scale(scale);
        im.set_scale(scale);
        let t = Instant::now();
        let out = self.slots_to_coeffs(ev, &re, &im)?;
        times.slots_to_coeffs_s = t.elapsed().as_secs_f64();
        Ok((out, times))
    }
}

impl<W: Word> Bootstrapper<W> {
    /// Sparse packing after ModRaise: the subring projection, CoeffToSlot with the halves packed
    /// into `2n` slots, one EvalMod, SlotToCoeff on the halves recombined (3 rotations by `n`
    /// in all, on a `2n`-periodic ciphertext).
    fn bootstrap_sparse(
        &self,
        ev: &Evaluator<W>,
        raised: Ciphertext<W>,
        scale: f64,
        mut times: BootstrapTimes,
    ) -> Result<(Ciphertext<W>, BootstrapTimes)> {
        let n = self.slots;
        let t = Instant::now();
        let w = self.sparse_coeffs_to_slots(ev, raised)?;
        times.coeffs_to_slots_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut w = self.eval_mod_real(ev, &w)?;
        times.eval_mod_s = t.elapsed().as_secs_f64();
        w.set_scale(scale);
        let t = Instant::now();
        // [r | s] -> r + i s in the lower half; the first level writes A (r + i s) there and
        // zero above, which one more rotation copies up: n-periodic slots again.
        let back = -(n as i64);
        w = ev.add(&w, &ev.multiply_by_i(&ev.rotate(&w, back)?)?)?;
        for (g, tr) in self.stc.iter().enumerate() {
            w = tr.apply_rescaled(ev, &w)?;
            if g == 0 {
                w = ev.add(&w, &ev.rotate(&w, back)?)?;
                w.slots = n;
            }
        }
        times.slots_to_coeffs_s = t.elapsed().as_secs_f64();
        Ok((w, times))
    }

    /// The raised ciphertext projected onto the subring of `n` slots (`sum_j rot(ct, j n)`, the
    /// other coefficients, `q_0 I` among them, cancel; the kept ones are multiplied by
    /// `N / 2n`, which CoeffToSlot divides out), then CoeffToSlot: `[Re y | Im y]` on `2n` slots.
    fn sparse_coeffs_to_slots(
        &self,
        ev: &Evaluator<W>,
        mut a: Ciphertext<W>,
    ) -> Result<Ciphertext<W>> {
        let n = self.slots;
        let full = self.ctx.n() / 2;
        a.slots = full;
        let mut step = n;
        while step < full {
            let r = ev.rotate(&a, step as i64)?;
            a = ev.add(&a, &r)?;
            step *= 2;
        }
        a.slots = n;
        let last = self.cts.len() - 1;
        for (g, tr) in self.cts.iter().enumerate() {
            if g == last {
                // The last level writes the lower half of 2n slots only.
                a.slots = 2 * n;
            }
            a = tr.apply_rescaled(ev, &a)?;
        }
        let ac = ev.conjugate(&a)?;
        let re = ev.add(&a, &ac)?;
        let im = ev.multiply_by_i(&ev.sub(&ac, &a)?)?;
        ev.add(&re, &ev.rotate(&im, -(n as i64))?)
    }
}

/// Wall time of each phase of a bootstrap, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BootstrapTimes {
    /// ModRaise (with encapsulation: both key switches).
    pub mod_raise_s: f64,
    /// CoeffToSlot and the split into real and imaginary parts.
    pub coeffs_to_slots_s: f64,
    /// Both EvalMods and their clean-up to real values.
    pub eval_mod_s: f64,
    /// SlotToCoeff.
    pub slots_to_coeffs_s: f64,
}

impl BootstrapTimes {
    /// The whole bootstrap.
    pub fn total_s(&self) -> f64 {
        self.mod_raise_s + self.coeffs_to_slots_s + self.eval_mod_s + self.slots_to_coeffs_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoding matrix entry `U_0[j][k] = zeta^(5^j k mod 2N)`, `zeta = exp(i pi / N)`.
    fn u0(n: usize, j: usize, k: usize) -> Complex64 {
        let two_n = 2 * n as u64;
        let mut g = 1u64;
        for _ in 0..j {
            g = g * 5 % two_n;
        }
        let e = g * k as u64 % two_n;
        Complex64::from_polar(1.0, PI * e as f64 / n as f64)
    }

    #[test]
    fn k_bounds_i_with_negligible_failure_and_the_degree_resolves_it() {
        // Irwin-Hall of 33 terms, exact: P(|I| >= 12) = 2^-45.1, P(|I| >= 13) = 2^-55.7
        // (computed with rational arithmetic).
        let f11 = BootstrapConfig::failure_log2(32, 11.0);
        let f12 = BootstrapConfig::failure_log2(32, 12.0);
        assert!((f11 + 45.1).abs() < 0.2, "{f11}");
        assert!((f12 + 55.7).abs() < 0.2, "{f12}");
        // Past the exact range, the sub-Gaussian bound: above the truth, still falling.
        let wide = BootstrapConfig::failure_log2(192, 30.0);
        assert!(wide < BootstrapConfig::failure_log2(192, 25.0));
        let c = BootstrapConfig::for_hamming_weight(32);
        assert_eq!((c.k, c.degree), (12.0, 127));
        // The degree resolves the sine's 2K periods on [-1, 1] and no more.
        assert_eq!(BootstrapConfig::degree_for(12.0, 0), 127);
        assert_eq!(BootstrapConfig::degree_for(25.0, 0), 255);
        assert_eq!(BootstrapConfig::degree_for(4.0, 0), 63);
        let coeffs = chebyshev_coefficients(|y| (2.0 * PI * 12.0 * y).sin(), -1.0, 1.0, 127);
        for &y in &[-0.93, -0.41, 0.07, 0.66, 1.0] {
            let (mut t0, mut t1, mut v) = (1.0, y, coeffs[0] + coeffs[1] * y);
            for c in &coeffs[2..] {
                let t2 = 2.0 * y * t1 - t0;
                v += c * t2;
                (t0, t1) = (t1, t2);
            }
            let want = (2.0 * PI * 12.0 * y).sin();
            assert!((v - want).abs() < 1e-12, "{y}: {v} vs {want}");
        }
    }

    #[test]
    fn chebyshev_interpolation_reproduces_a_polynomial() {
        // 1 + 2x + 3x^2 on [-2, 2] at degree 2 is exact: T-basis evaluation matches.
        let f = |x: f64| 1.0 + 2.0 * x + 3.0 * x * x;
        let c = chebyshev_coefficients(f, -2.0, 2.0, 2);
        for &x in &[-2.0, -0.7, 0.0, 1.3, 2.0] {
            let y: f64 = x / 2.0;
            let v = c[0] + c[1] * y + c[2] * (2.0 * y * y - 1.0);
            assert!((v - f(x)).abs() < 1e-12, "{x}: {v} vs {}", f(x));
        }
    }

    /// `M v` for a matrix in diagonal form.
    fn apply(m: &Diags, v: &[Complex64]) -> Vec<Complex64> {
        let l = v.len();
        (0..l)
            .map(|t| m.iter().map(|(&i, d)| d[t] * v[(t + i) % l]).sum())
            .collect()
    }

    #[test]
    fn the_butterfly_stages_factor_the_decoding_matrix() {
        let n: usize = 64;
        let l = n / 2;
        let bits = l.trailing_zeros();
        let v: Vec<Complex64> = (0..l)
            .map(|k| Complex64::new((k as f64 * 0.37).sin(), (k as f64 * 0.11).cos()))
            .collect();
        // U_0 v by definition.
        let want: Vec<Complex64> = (0..l)
            .map(|j| (0..l).map(|k| u0(n, j, k) * v[k]).sum())
            .collect();
        // F_(l/2) .. F_1 applied to BR(v), stage by stage and as one merged matrix.
        let br: Vec<Complex64> = (0..l)
            .map(|t| v[(t as u32).reverse_bits() as usize >> (32 - bits)])
            .collect();
        let stages: Vec<Diags> = (0..bits)
            .map(|k| butterfly_stage(l, 1 << k, false))
            .collect();
        let mut got = br.clone();
        let mut merged = stages[0].clone();
        for (k, st) in stages.iter().enumerate() {
            got = apply(st, &got);
            if k > 0 {
                merged = compose(st, &merged, l);
            }
        }
        let one = apply(&merged, &br);
        for t in 0..l {
            assert!(
                (got[t] - want[t]).norm() < 1e-9,
                "slot {t}: {} vs {}",
                got[t],
                want[t]
            );
            assert!((one[t] - want[t]).norm() < 1e-9, "merged, slot {t}");
        }
        // The inverse stages, last stage first, undo it back to BR(v).
        let mut back = want;
        for k in (0..bits).rev() {
            back = apply(&butterfly_stage(l, 1 << k, true), &back);
        }
        for t in 0..l {
            assert!((back[t] - br[t]).norm() < 1e-9, "inverse, slot {t}");
        }
    }

    #[test]
    fn the_decoding_matrix_is_unitary_up_to_n_over_2() {
        let n = 32;
        for a in 0..n / 2 {
            for b in 0..n / 2 {
                let s: Complex64 = (0..n / 2).map(|j| u0(n, j, a).conj() * u0(n, j, b)).sum();
                let want = if a == b { n as f64 / 2.0 } else { 0.0 };
                assert!(
                    (s - Complex64::new(want, 0.0)).norm() < 1e-9,
                    "{a},{b}: {s}"
                );
            }
        }
    }
}

/// An evaluator that bootstraps ciphertexts when their levels run out: a computation asks for
/// the levels its next step uses ([`Self::ensure_levels`]) or evaluates a polynomial
/// ([`Self::evaluate_polynomial`]) and gets the input back refreshed when it holds too few.
/// Counts the bootstraps it ran.
#[derive(Debug)]
pub struct AutoBootstrap<W: Word> {
    ev: Evaluator<W>,
    boot: Bootstrapper<W>,
    count: std::sync::atomic::AtomicUsize,
}

impl<W: Word> AutoBootstrap<W> {
    /// Bootstraps with `boot` on `ev` (its keys: relinearization, conjugation and
    /// [`Bootstrapper::rotation_steps`], plus whatever the computation rotates by; its thread
    /// budget runs every bootstrap).
    pub fn new(ev: Evaluator<W>, boot: Bootstrapper<W>) -> Self {
        Self {
            ev,
            boot,
            count: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The evaluator.
    pub fn evaluator(&self) -> &Evaluator<W> {
        &self.ev
    }

    /// The bootstrapper.
    pub fn bootstrapper(&self) -> &Bootstrapper<W> {
        &self.boot
    }

    /// Bootstraps run so far.
    pub fn bootstraps(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The most levels a step can ask for: what a bootstrapped ciphertext holds.
    pub fn max_levels(&self) -> usize {
        self.boot.output_level()
    }

    /// `ct` if it holds at least `needed` levels, else `ct` bootstrapped (a two-polynomial,
    /// full-packing ciphertext). Asking for more than [`Self::max_levels`] is an error that
    /// says to split the step.
    pub fn ensure_levels(&self, ct: &Ciphertext<W>, needed: usize) -> Result<Ciphertext<W>> {
        if ct.level() >= needed {
            return Ok(ct.clone());
        }
        if needed > self.max_levels() {
            return Err(CkksError::OutOfLevels {
                level: ct.level(),
                needed,
                hint: format!(
                    "a bootstrapped ciphertext holds {} levels and this step needs {needed}; split it into steps of at most {} levels",
                    self.max_levels(),
                    self.max_levels()
                ),
            });
        }
        PolyOps::bootstrap(self, ct)
    }

    /// [`Evaluator::evaluate_polynomial`], bootstrapping `ct` first when it holds fewer levels
    /// than the polynomial's depth.
    pub fn evaluate_polynomial(
        &self,
        ct: &Ciphertext<W>,
        coeffs: &[f64],
        basis: PolyBasis,
    ) -> Result<Ciphertext<W>> {
        let degree = coeffs.iter().rposition(|&c| c != 0.0).unwrap_or(0);
        let depth = Evaluator::<W>::polynomial_depth(degree, basis);
        let ct = self.ensure_levels(ct, depth)?;
        self.ev.evaluate_polynomial(&ct, coeffs, basis)
    }
}

/// An [`Evaluator`] that bootstraps: every circuit written against [`PolyOps`] (polynomials,
/// linear transforms, task graphs with bootstrap nodes) runs on it, and polynomial evaluation
/// bootstraps its input when the levels run out.
impl<W: Word> PolyOps for AutoBootstrap<W> {
    type Ct = Ciphertext<W>;
    fn moduli(&self) -> &[u64] {
        self.ev.moduli()
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
        self.ev.with_scale(ct, scale)
    }
    fn add(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.ev.add(a, b)
    }
    fn sub(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.ev.sub(a, b)
    }
    fn add_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        self.ev.add_const(ct, c)
    }
    fn multiply_int(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct> {
        self.ev.multiply_int(ct, k)
    }
    fn multiply_const_exact(&self, ct: &Self::Ct, k: i128) -> Result<Self::Ct> {
        PolyOps::multiply_const_exact(&self.ev, ct, k)
    }
    fn multiply_const(&self, ct: &Self::Ct, c: f64) -> Result<Self::Ct> {
        self.ev.multiply_const(ct, c)
    }
    fn multiply(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.ev.multiply(a, b)
    }
    fn square(&self, a: &Self::Ct) -> Result<Self::Ct> {
        self.ev.square(a)
    }
    fn relinearize(&self, a: &Self::Ct) -> Result<Self::Ct> {
        self.ev.relinearize(a)
    }
    fn rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        self.ev.rescale(a)
    }
    fn relinearize_rescale(&self, a: &Self::Ct) -> Result<Self::Ct> {
        PolyOps::relinearize_rescale(&self.ev, a)
    }
    fn merges_rescale(&self) -> bool {
        PolyOps::merges_rescale(&self.ev)
    }
    fn drop_to_level(&self, a: &Self::Ct, level: usize) -> Result<Self::Ct> {
        self.ev.drop_to_level(a, level)
    }
    fn rotate(&self, ct: &Self::Ct, step: i64) -> Result<Self::Ct> {
        self.ev.rotate(ct, step)
    }
    fn rotate_many(&self, ct: &Self::Ct, steps: &[i64]) -> Result<Vec<Self::Ct>> {
        self.ev.rotate_many(ct, steps)
    }
    fn multiply_plain_slots(&self, ct: &Self::Ct, values: &[f64]) -> Result<Self::Ct> {
        self.ev.multiply_plain_slots(ct, values)
    }
    fn multiply_int_accumulate(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        level: usize,
        k: i128,
        scale: f64,
    ) -> Result<()> {
        self.ev.multiply_int_accumulate(acc, ct, level, k, scale)
    }
    fn bootstrap_level(&self) -> Option<usize> {
        Some(self.max_levels())
    }
    fn bootstrap(&self, ct: &Self::Ct) -> Result<Self::Ct> {
        let ct = if ct.size() == 3 {
            self.ev.relinearize(ct)?
        } else {
            ct.clone()
        };
        let out = self.boot.bootstrap(&self.ev, &ct)?;
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(out)
    }
}
