//! Bootstrapping (`circuits::bootstrap`) at a small, insecure ring (N = 2^10, Hamming weight 16,
//! chosen so the test runs in seconds): ModRaise and CoeffToSlot leave near-integers `I + m/q_0`
//! in the slots, and a whole bootstrap gives back the encrypted values at a higher level.
//!
//! Bound: q_0 = 2^50 against a scale of 2^40 and m_k about 2^40 / sqrt(512) leave m/q_0 near
//! 2^-14, so the sine's cubic error is about 2^-24 relative; EvalMod's Chebyshev approximation
//! and the transforms' rounding keep the result within 2^-20 of the input on every slot
//! (measured: 2^-25 to 2^-26.5).

#![allow(clippy::unwrap_used)]

use heloom_ckks::circuits::bootstrap::{sparse_secret_keys, BootstrapConfig, Bootstrapper};
use heloom_ckks::*;
use num_complex::Complex64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const H: usize = 16;

struct Setup {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
    boot: Bootstrapper<u64>,
    ev: Evaluator<u64>,
}

fn setup() -> Setup {
    setup_with(SecretDistribution::FixedHamming(H))
}

fn setup_with(secret: SecretDistribution) -> Setup {
    let config = BootstrapConfig::for_hamming_weight(H);
    // q_0, one level for the computation, SlotToCoeff, EvalMod, CoeffToSlot.
    let params = CkksParameters::builder(1 << 10)
        .prime_bits(config.chain_bits(50, &[40]))
        .special_bits(60)
        .security(SecurityLevel::None)
        .secret(secret)
        .build()
        .unwrap();
    let ctx = Context::new(params).unwrap();
    let boot = Bootstrapper::new(&ctx, config, Threads::new(2)).unwrap();
    assert_eq!(boot.output_level(), 1);
    let keys = keygen(&ctx, &boot.rotation_steps(), true).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
    Setup {
        ctx,
        keys,
        boot,
        ev,
    }
}

fn encrypt_at_level_0(s: &Setup, z: &[Complex64]) -> Ciphertext<u64> {
    let enc = Encryptor::new(&s.ctx);
    let ct = enc.encrypt_complex(z, &s.keys.public_key).unwrap();
    s.ev.drop_to_level(&ct, 0).unwrap()
}

fn random(rng: &mut ChaCha8Rng, n: usize, complex: bool) -> Vec<Complex64> {
    (0..n)
        .map(|_| {
            let im = if complex {
                rng.gen_range(-1.0..1.0)
            } else {
                0.0
            };
            Complex64::new(rng.gen_range(-1.0..1.0), im)
        })
        .collect()
}

#[test]
fn bootstrapping_restores_the_values_at_a_higher_level() {
    let s = setup();
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).unwrap();
    let slots = s.ctx.n() / 2;
    let mut rng = ChaCha8Rng::seed_from_u64(7);

    // ModRaise and CoeffToSlot: every slot is (I + m/q_0) / K with |m/q_0| <= 2^-9 and |I| <= K.
    let z = random(&mut rng, slots, true);
    let ct = encrypt_at_level_0(&s, &z);
    let raised = s.boot.mod_raise(&s.ev, &ct).unwrap();
    assert_eq!(raised.level(), s.ctx.max_level());
    let (re, im) = s.boot.coeffs_to_slots(&s.ev, &raised).unwrap();
    let k = s.boot.config().k;
    let mut biggest = 0.0f64;
    for c in [&re, &im] {
        for v in dec.decrypt_complex(c).unwrap() {
            let v = v * k;
            let frac = (v.re - v.re.round()).abs();
            assert!(frac < 2e-3, "slot {v} is not near an integer");
            assert!(v.im.abs() < 1e-4, "slot {v} is not real");
            biggest = biggest.max(v.re.abs());
        }
    }
    assert!(
        biggest <= s.boot.config().k,
        "|I| reached {biggest}, past K"
    );
    assert!(biggest >= 1.0, "I was zero everywhere: nothing was raised");

    // The whole bootstrap, on real and on complex values.
    for complex in [false, true] {
        let z = random(&mut rng, slots, complex);
        let ct = encrypt_at_level_0(&s, &z);
        let out = s.boot.bootstrap(&s.ev, &ct).unwrap();
        assert_eq!(out.level(), 1);
        assert_eq!(out.scale(), ct.scale());
        let got = dec.decrypt_complex(&out).unwrap();
        let err = got
            .iter()
            .zip(&z)
            .map(|(g, w)| (g - w).norm())
            .fold(0.0, f64::max);
        eprintln!(
            "bootstrapped {} values: max error 2^{:.1}",
            if complex { "complex" } else { "real" },
            err.log2()
        );
        assert!(err < 2f64.powi(-20), "max error {err:e}");
        // The level it gained is usable: one more product.
        let sq = s.ev.square(&out).unwrap();
        let sq = s.ev.rescale(&s.ev.relinearize(&sq).unwrap()).unwrap();
        let got = dec.decrypt_complex(&sq).unwrap();
        let err = got
            .iter()
            .zip(&z)
            .map(|(g, w)| (g - w * w).norm())
            .fold(0.0, f64::max);
        assert!(err < 2f64.powi(-13), "squared: max error {err:e}");
    }
}

#[test]
fn bootstrapping_refuses_what_it_cannot_do() {
    let s = setup();
    let enc = Encryptor::new(&s.ctx);
    let few = enc.encrypt(&[0.5; 8], &s.keys.public_key).unwrap();
    let e = s.boot.bootstrap(&s.ev, &few).unwrap_err();
    assert!(e.to_string().contains("with_slots"), "{e}");
    // Sparse packing needs a slot count the transforms' levels can split.
    let e = Bootstrapper::with_slots(&s.ctx, s.boot.config(), 4, Threads::new(1)).unwrap_err();
    assert!(e.to_string().contains("power-of-two slot count"), "{e}");
    let e = Bootstrapper::with_slots(&s.ctx, s.boot.config(), 96, Threads::new(1)).unwrap_err();
    assert!(e.to_string().contains("power-of-two slot count"), "{e}");
    let short = CkksParameters::builder(1 << 10)
        .levels(4)
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    let ctx = Context::<u64>::new(short).unwrap();
    let e = Bootstrapper::new(
        &ctx,
        BootstrapConfig::for_hamming_weight(H),
        Threads::new(1),
    )
    .unwrap_err();
    assert!(e.to_string().contains("bootstrappable"), "{e}");
}

fn max_error(s: &Setup, boot: &Bootstrapper<u64>, z: &[Complex64]) -> f64 {
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).unwrap();
    let ct = encrypt_at_level_0(s, z);
    let out = boot.bootstrap(&s.ev, &ct).unwrap();
    assert_eq!(out.level(), 1);
    dec.decrypt_complex(&out)
        .unwrap()
        .iter()
        .zip(z)
        .map(|(g, w)| (g - w).norm())
        .fold(0.0, f64::max)
}

/// Sparse packing: ciphertexts of 16, 64 and 256 of the 512 slots bootstrap within the full
/// packing's bound, at the same output level; the transforms are smaller (fewer butterfly
/// stages) and a bootstrapper refuses a ciphertext of another slot count. Fewer slots make
/// larger coefficients, so the sine's cubic error grows (measured 2^-21.8, 2^-22.4, 2^-24.1;
/// 2^-20.8 at 8 slots): the arcsine correction removes it where that matters.
#[test]
fn sparse_packing_bootstraps_fewer_slots() {
    let s = setup();
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for n in [16usize, 64, 256] {
        let boot = Bootstrapper::with_slots(&s.ctx, s.boot.config(), n, Threads::new(2)).unwrap();
        assert_eq!(boot.slots(), n);
        assert_eq!(boot.output_level(), s.boot.output_level());
        assert!(boot.memory_bytes() < s.boot.memory_bytes());
        let keys = keygen(&s.ctx, &boot.rotation_steps(), true).unwrap();
        let ev = Evaluator::new(&s.ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
        let enc = Encryptor::new(&s.ctx);
        let dec = Decryptor::new(&s.ctx, &keys.secret_key).unwrap();
        let z = random(&mut rng, n, true);
        let ct = enc.encrypt_complex(&z, &keys.public_key).unwrap();
        let ct = ev.drop_to_level(&ct, 0).unwrap();
        let out = boot.bootstrap(&ev, &ct).unwrap();
        assert_eq!(out.level(), 1);
        assert_eq!(out.slots(), n);
        assert!((out.scale() / ct.scale() - 1.0).abs() < 1e-9);
        let got = dec.decrypt_complex(&out).unwrap();
        assert_eq!(got.len(), n);
        let err = got
            .iter()
            .zip(&z)
            .map(|(g, w)| (g - w).norm())
            .fold(0.0, f64::max);
        eprintln!("sparse packing, {n} slots: max error 2^{:.1}", err.log2());
        assert!(err < 2f64.powi(-20), "{n} slots: max error {err:e}");
        // A full-slot ciphertext is refused by the sparse bootstrapper.
        let full = enc
            .encrypt_complex(&random(&mut rng, s.ctx.n() / 2, true), &keys.public_key)
            .unwrap();
        let e = boot.bootstrap(&ev, &full).unwrap_err();
        assert!(e.to_string().contains(&format!("{n} slots")), "{e}");
    }
}

/// A dense ternary secret (h about 2N/3) gives |I| far past K = 8: bootstrapping it directly
/// fails, and with sparse-secret encapsulation (ModRaise under a secret of weight 16) it works.
#[test]
fn sparse_secret_encapsulation_bootstraps_a_dense_secret() {
    let s = setup_with(SecretDistribution::Ternary);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let z = random(&mut rng, s.ctx.n() / 2, true);
    let plain = max_error(&s, &s.boot, &z);
    assert!(
        plain > 0.01,
        "without encapsulation the error was only {plain:e}"
    );
    let sparse = sparse_secret_keys(&s.ctx, &s.keys.secret_key, H).unwrap();
    // The level-0 key exists modulo q_0 and the special primes only.
    for j in 0..sparse.to_sparse.dnum() {
        let (b, _) = sparse.to_sparse.digit(j).unwrap();
        for i in 1..=s.ctx.max_level() {
            assert!(
                b.limb(i).iter().all(|&x| x == 0),
                "limb {i} of digit {j} is set"
            );
        }
        assert!(b.limb(0).iter().any(|&x| x != 0));
    }
    let boot = s.boot.clone().with_sparse_keys(Arc::new(sparse)).unwrap();
    let err = max_error(&s, &boot, &z);
    eprintln!(
        "with sparse-secret encapsulation: max error 2^{:.1}",
        err.log2()
    );
    assert!(err < 2f64.powi(-20), "max error {err:e}");
}

/// Fewer keys, more rotations: power-of-two baby steps only, a subset of the full key set's
/// steps, and the same precision bound.
#[test]
fn fewer_keys_bootstrap_with_power_of_two_baby_steps() {
    let s = setup();
    let mut config = s.boot.config();
    config.fewer_keys = true;
    let lean = Bootstrapper::new(&s.ctx, config, Threads::new(2)).unwrap();
    let (all, few) = (s.boot.rotation_steps(), lean.rotation_steps());
    assert!(few.len() < all.len(), "{few:?} is not fewer than {all:?}");
    for step in &few {
        // Baby steps are powers of two times their stage's power-of-two stride, and so are
        // the giant steps (plus and minus the baby span).
        assert!(
            step.unsigned_abs().is_power_of_two(),
            "step {step} is not a power of two"
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let z = random(&mut rng, s.ctx.n() / 2, true);
    let err = max_error(&s, &lean, &z);
    eprintln!("fewer keys: max error 2^{:.1}", err.log2());
    assert!(err < 2f64.powi(-20), "max error {err:e}");
}

/// The arcsine correction with the message brought to `q_0 / 2^4` (a 60-bit `q_0`, the N = 2^16
/// preset's layout): bootstraps within the same bound, costs the arcsine's 2 levels, refuses an
/// even degree and a ciphertext whose scale leaves no room for the factor.
#[test]
fn arcsine_correction_with_a_small_message_ratio() {
    let mut config = BootstrapConfig::for_hamming_weight(H);
    let plain_depth = config.eval_mod_depth();
    config.arcsine_degree = 3;
    config.message_ratio_bits = 4;
    assert_eq!(config.eval_mod_depth(), plain_depth + 2);
    let params = CkksParameters::builder(1 << 10)
        .prime_bits(config.chain_bits(60, &[40]))
        .special_bits(60)
        .security(SecurityLevel::None)
        .secret(SecretDistribution::FixedHamming(H))
        .build()
        .unwrap();
    let ctx = Context::new(params).unwrap();
    let mut even = config;
    even.arcsine_degree = 4;
    let e = Bootstrapper::new(&ctx, even, Threads::new(1)).unwrap_err();
    assert!(e.to_string().contains("odd"), "{e}");
    let boot = Bootstrapper::new(&ctx, config, Threads::new(2)).unwrap();
    // q_0 / 2^40 = 2^20: the message is multiplied by 2^16.
    assert_eq!(boot.message_factor(), 1 << 16);
    assert_eq!(boot.output_level(), 1);
    let keys = keygen(&ctx, &boot.rotation_steps(), true).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
    let s = Setup {
        ctx,
        keys,
        boot,
        ev,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let z = random(&mut rng, s.ctx.n() / 2, true);
    let err = max_error(&s, &s.boot, &z);
    eprintln!(
        "arcsine, message at q_0 / 2^4: max error 2^{:.1}",
        err.log2()
    );
    assert!(err < 2f64.powi(-20), "max error {err:e}");

    // A scale of 2^52 times 2^16 would put the message above q_0: refused.
    let pt = s.ctx.encode_complex_at(&z, 0, 2f64.powi(52)).unwrap();
    let big = Encryptor::new(&s.ctx)
        .encrypt_plaintext(&pt, &s.keys.public_key)
        .unwrap();
    let e = s.boot.bootstrap(&s.ev, &big).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
}

/// Compact diagonals (one word per coefficient, expanded at each use): the transforms take a
/// fraction of the memory and the bootstrap gives the same words.
#[test]
fn compact_diagonals_bootstrap_to_the_same_words() {
    let s = setup();
    let mut config = s.boot.config();
    config.compact_diagonals = true;
    let lean = Bootstrapper::new(&s.ctx, config, Threads::new(2)).unwrap();
    let (full, small) = (s.boot.memory_bytes(), lean.memory_bytes());
    eprintln!("transforms: {full} bytes in NTT form, {small} compact");
    // 3 to 16 primes a diagonal at N = 2^10 here (measured 8.6x less overall).
    assert!(4 * small < full, "{small} against {full}");
    assert!(lean
        .coeffs_to_slots_transforms()
        .iter()
        .chain(lean.slots_to_coeffs_transforms())
        .all(|t| t.compact()));
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let z = random(&mut rng, s.ctx.n() / 2, true);
    let ct = encrypt_at_level_0(&s, &z);
    let a = s.boot.bootstrap(&s.ev, &ct).unwrap();
    let b = lean.bootstrap(&s.ev, &ct).unwrap();
    assert!(
        a.polys() == b.polys(),
        "compact diagonals changed the result"
    );
}
