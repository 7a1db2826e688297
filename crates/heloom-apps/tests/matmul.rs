//! Encrypted matrix products against the plaintext products, on 32- and 64-bit words.
//!
//! Parameters: N = 2^13 at 128-bit security, `q_0` of 30 bits and three 25-bit scaling primes
//! (the prime sizes of `heloom bench matmul`, fewer levels). Entries uniform in [-1, 1].
//! Bound: the largest absolute error over all entries is at most 1e-3 (the products'
//! entries reach a few units at d = 16; the scale 2^25 leaves about 2^-14 of fresh noise per
//! slot, which the D-term sums grow by about sqrt(D)).

#[path = "../../heloom-ckks/tests/common/mod.rs"]
mod common;

use common::Setup;
use heloom_apps::matmul::{diag, jiang, max_abs_error, Matrix};
use heloom_apps::AppError;
use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, SecurityLevel, Threads,
};
use heloom_math::Word;
use std::sync::Arc;

type R = Result<(), Box<dyn std::error::Error>>;

const BOUND: f64 = 1e-3;
const DIMS: [usize; 5] = [3, 4, 5, 8, 16];

fn params(word_bits: u32) -> CkksParameters {
    CkksParameters::builder(1 << 13)
        .word_bits(word_bits)
        .levels(3)
        .scale_bits(25)
        .first_bits(30)
        .build()
        .expect("parameters")
}

fn setup<W: Word>(word_bits: u32, steps: &[i64]) -> Setup<W> {
    Setup::new(params(word_bits), steps, false)
}

fn all_steps() -> Vec<i64> {
    let mut s: Vec<i64> = DIMS
        .iter()
        .flat_map(|&d| {
            diag::rotation_steps(d)
                .into_iter()
                .chain(jiang::rotation_steps(d))
        })
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn both_products<W: Word>(word_bits: u32) -> R {
    let s = setup::<W>(word_bits, &all_steps());
    let top = s.ctx.max_level();
    for (i, &d) in DIMS.iter().enumerate() {
        let seed = 100 * d as u64 + word_bits as u64;
        // Plaintext matrix x encrypted vector, on two threads (results do not depend on it).
        let m = Matrix::random(d, seed);
        let v = Matrix::random(d, seed + 1).data()[..d].to_vec();
        let ev = if i % 2 == 0 {
            s.ev.clone()
        } else {
            s.ev.with_threads(Threads::new(2))
        };
        let dm = diag::DiagonalMatrix::encode(&s.ctx, &m, top, Threads::new(2))?;
        let ct = s
            .enc
            .encrypt(&diag::pack_vector(&v, d)?, &s.keys.public_key)?;
        let y = dm.multiply_rescaled(&ev, &ct)?;
        assert_eq!(y.level(), top - 1);
        let got = diag::unpack_vector(&s.dec.decrypt(&y)?, d)?;
        let err = max_abs_error(&got, &m.mul_vec(&v)?);
        eprintln!("{word_bits}-bit d = {d}: M v error {err:.2e}");
        assert!(err <= BOUND, "M v, d = {d}: error {err}");

        // Encrypted x encrypted.
        let a = Matrix::random(d, seed + 2);
        let b = Matrix::random(d, seed + 3);
        let jm = jiang::JiangMultiplier::new(&s.ctx, d, top, Threads::new(2))?;
        let ca = s
            .enc
            .encrypt(&jiang::pack_matrix(&a)?, &s.keys.public_key)?;
        let cb = s
            .enc
            .encrypt(&jiang::pack_matrix(&b)?, &s.keys.public_key)?;
        let c = jm.multiply(&ev, &ca, &cb)?;
        assert_eq!(c.level(), top - jiang::LEVELS);
        let got = jiang::unpack_matrix(&s.dec.decrypt(&c)?, d)?;
        let err = max_abs_error(got.data(), a.mul(&b)?.data());
        eprintln!("{word_bits}-bit d = {d}: A B error {err:.2e}");
        assert!(err <= BOUND, "A B, d = {d}: error {err}");
    }
    Ok(())
}

#[test]
fn products_match_plaintext_on_64_bit_words() -> R {
    both_products::<u64>(64)
}

#[test]
fn products_match_plaintext_on_32_bit_words() -> R {
    both_products::<u32>(32)
}

#[test]
fn sparse_matrices_skip_zero_diagonals() -> R {
    let d = 8;
    let s = setup::<u64>(64, &diag::rotation_steps(d));
    // Tridiagonal: diagonals 0, 1 and D - 1 only.
    let mut data = vec![0.0; d * d];
    for i in 0..d {
        data[i * d + i] = 0.5;
        data[i * d + (i + 1) % d] = -0.25;
        data[i * d + (i + d - 1) % d] = 0.75;
    }
    let m = Matrix::new(d, d, data)?;
    let dm = diag::DiagonalMatrix::encode(&s.ctx, &m, 2, Threads::single())?;
    assert_eq!(dm.nonzero_diagonals(), 3);
    let v: Vec<f64> = (0..d).map(|i| (i as f64 - 3.5) / 4.0).collect();
    // Encrypted at the top level: dropped to the matrix's level 2.
    let ct = s
        .enc
        .encrypt(&diag::pack_vector(&v, d)?, &s.keys.public_key)?;
    let y = dm.multiply_rescaled(&s.ev, &ct)?;
    assert_eq!(y.level(), 1);
    let got = diag::unpack_vector(&s.dec.decrypt(&y)?, d)?;
    assert!(max_abs_error(&got, &m.mul_vec(&v)?) <= BOUND);
    // The zero matrix gives zeros.
    let z = diag::DiagonalMatrix::encode(
        &s.ctx,
        &Matrix::new(d, d, vec![0.0; d * d])?,
        2,
        Threads::single(),
    )?;
    let got = s.dec.decrypt(&z.multiply_rescaled(&s.ev, &ct)?)?;
    assert!(got.iter().all(|x| x.abs() <= BOUND));
    Ok(())
}

fn invalid(e: AppError) -> String {
    match e {
        AppError::Invalid(m) => m,
        other => panic!("expected an invalid-input error, got {other}"),
    }
}

#[test]
fn bad_inputs_are_refused() -> R {
    let d = 4;
    let s = setup::<u32>(32, &[1]);
    let top = s.ctx.max_level();
    // Non-square.
    let rect = Matrix::new(2, 3, vec![0.5; 6])?;
    let e = diag::DiagonalMatrix::encode(&s.ctx, &rect, top, Threads::single())
        .err()
        .ok_or("non-square accepted")?;
    assert!(invalid(e).contains("2 x 3"));
    assert!(jiang::pack_matrix(&rect).is_err());
    assert!(Matrix::from_rows(&[vec![1.0, 2.0], vec![3.0]]).is_err());
    // Oversized: D^2 > N/2 = 4096 slots (d = 65 pads to 128).
    for big in [65, 128] {
        let e = jiang::JiangMultiplier::<u32>::new(&s.ctx, big, top, Threads::single())
            .err()
            .ok_or("oversized accepted")?;
        assert!(invalid(e).contains("slots"));
    }
    let huge = Matrix::new(4097, 4097, vec![0.0; 4097 * 4097])?;
    let e = diag::DiagonalMatrix::encode(&s.ctx, &huge, top, Threads::single())
        .err()
        .ok_or("oversized accepted")?;
    assert!(invalid(e).contains("slots"));
    drop(huge);
    // Too few levels.
    assert!(jiang::JiangMultiplier::<u32>::new(&s.ctx, d, 2, Threads::single()).is_err());
    assert!(
        diag::DiagonalMatrix::encode(&s.ctx, &Matrix::random(d, 1), 0, Threads::single()).is_err()
    );
    // Vector of the wrong length.
    assert!(diag::pack_vector(&[1.0; 3], d).is_err());
    // Missing Galois keys: the message lists the missing steps.
    let jm = jiang::JiangMultiplier::new(&s.ctx, d, top, Threads::single())?;
    let a = Matrix::random(d, 7);
    let ca = s
        .enc
        .encrypt(&jiang::pack_matrix(&a)?, &s.keys.public_key)?;
    let msg = invalid(
        jm.product(&s.ev, &ca, &ca)
            .err()
            .ok_or("no keys accepted")?,
    );
    let missing: Vec<i64> = jiang::rotation_steps(d)
        .into_iter()
        .filter(|&x| x != 1)
        .collect();
    assert!(msg.contains(&format!("{missing:?}")), "{msg}");
    let dm = diag::DiagonalMatrix::encode(&s.ctx, &a, top, Threads::single())?;
    let cv = s
        .enc
        .encrypt(&diag::pack_vector(&[0.5; 4], d)?, &s.keys.public_key)?;
    let msg = invalid(dm.multiply(&s.ev, &cv).err().ok_or("no keys accepted")?);
    assert!(msg.contains("[2]"), "{msg}");
    // A vector packed in the wrong slot count.
    let wide = s.enc.encrypt(&[0.5; 16], &s.keys.public_key)?;
    let msg = invalid(
        dm.multiply(&s.ev, &wide)
            .err()
            .ok_or("wrong packing accepted")?,
    );
    assert!(msg.contains("16 slots"), "{msg}");
    assert!(jm.product(&s.ev, &wide, &ca).is_err());
    // Inputs below the multiplier's level.
    let low = s.ev.drop_to_level(&ca, top - 1)?;
    assert!(invalid(
        jm.product(&s.ev, &low, &ca)
            .err()
            .ok_or("low level accepted")?
    )
    .contains("level"));
    Ok(())
}

#[test]
fn insecure_tiny_parameters_still_work() -> R {
    // N = 2^10 with the security opt-out: d = 16 fills all 512 slots.
    let p = CkksParameters::builder(1 << 10)
        .levels(3)
        .scale_bits(30)
        .first_bits(40)
        .security(SecurityLevel::None)
        .build()?;
    let ctx = Context::<u64>::new(p)?;
    let d = 16;
    let keys = keygen(&ctx, &jiang::rotation_steps(d), false)?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
    let (a, b) = (Matrix::random(d, 1), Matrix::random(d, 2));
    let jm = jiang::JiangMultiplier::new(&ctx, d, 3, Threads::single())?;
    let ca = enc.encrypt(&jiang::pack_matrix(&a)?, &keys.public_key)?;
    let cb = enc.encrypt(&jiang::pack_matrix(&b)?, &keys.public_key)?;
    let got = jiang::unpack_matrix(&dec.decrypt(&jm.multiply(&ev, &ca, &cb)?)?, d)?;
    let err = max_abs_error(got.data(), a.mul(&b)?.data());
    assert!(err <= BOUND, "{err}");
    Ok(())
}
