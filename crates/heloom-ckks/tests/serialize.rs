//! The binary format (`heloom_ckks::serialize`) on both word sizes: round trips that are
//! bit-identical and decrypt to the same values, sizes against the bit-packed estimate, every
//! kind of bad input, and a stable "fuzz-like" run of random mutations. The bodies of the
//! cargo-fuzz targets (`fuzz/src/lib.rs`) are compiled and run here too.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_bodies;

use common::{max_err, rand_vec, Setup};
use heloom_ckks::serialize::{
    peek_header, peek_kind, upgrade_v1, upgrade_v1_params, ObjectKind, CHECKSUM_LEN,
    FORMAT_VERSION, HEADER_LEN, MAGIC, MAX_PAYLOAD_BYTES,
};
use heloom_ckks::*;
use heloom_math::{RnsPoly, Word};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, OnceLock};
use xxhash_rust::xxh3::xxh3_64;

/// Header and checksum: the bytes around every payload.
const FRAME: usize = HEADER_LEN + CHECKSUM_LEN;

// ----- setups -----

const STEPS: [i64; 2] = [1, -3];

fn p32() -> CkksParameters {
    CkksParameters::new(1 << 13, 2, 28, 32).expect("32-bit parameters")
}

fn p64() -> CkksParameters {
    CkksParameters::new(1 << 13, 2, 40, 64).expect("64-bit parameters")
}

fn make<W: Word>(params: CkksParameters) -> Setup<W> {
    Setup::new(params, &STEPS, true)
}

fn s32() -> &'static Setup<u32> {
    static S: OnceLock<Setup<u32>> = OnceLock::new();
    S.get_or_init(|| make(p32()))
}

fn s64() -> &'static Setup<u64> {
    static S: OnceLock<Setup<u64>> = OnceLock::new();
    S.get_or_init(|| make(p64()))
}

/// Runs a generic test body on both word sizes.
macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
            fn u32() {
                super::$body(super::s32());
            }
            #[test]
            fn u64() {
                super::$body(super::s64());
            }
        }
    };
}

/// Loose decryption bound: the bit-identical checks are the real ones, this only says the
/// values are there (32-bit words have scale 2^28).
const BOUND: f64 = 1e-2;

fn same_ct<W: Word>(a: &Ciphertext<W>, b: &Ciphertext<W>) {
    assert_eq!(a.level(), b.level());
    assert_eq!(a.size(), b.size());
    assert_eq!(a.slots(), b.slots());
    assert_eq!(a.scale().to_bits(), b.scale().to_bits());
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.is_seeded(), b.is_seeded());
    assert!(
        a.polys() == b.polys(),
        "polynomials differ after a round trip"
    );
}

fn format_msg<T>(r: Result<T>) -> String {
    match r {
        Err(CkksError::Format(m)) => m,
        Err(e) => panic!("expected a format error, got {e:?}"),
        Ok(_) => panic!("expected a format error, got a valid object"),
    }
}

fn mismatch_msg<T>(r: Result<T>) -> String {
    match r {
        Err(CkksError::ParameterMismatch(m)) => m,
        Err(e) => panic!("expected a parameter mismatch, got {e:?}"),
        Ok(_) => panic!("expected a parameter mismatch, got a valid object"),
    }
}

fn prime_bits(q: u64) -> usize {
    (64 - q.leading_zeros()) as usize
}

/// Payload bytes of one polynomial over `primes` packed at the primes' bit lengths: the most
/// a packed polynomial takes.
fn packed_poly_len(n: usize, primes: &[u64]) -> usize {
    2 + primes.len() + primes.iter().map(|&q| n * prime_bits(q) / 8).sum::<usize>()
}

/// Payload bytes of `p` packed at the bit length of each limb's largest value (what the writer
/// does), checking that this is the prime's bit length or one less: the latter happens for a
/// prime just above a power of two, where no uniform value reaches the top bit (a 41-bit prime
/// `2^40 + c` with small `c` packs at 40 bits).
fn packed_len_of<W: Word>(p: &RnsPoly<W>, primes: &[u64]) -> usize {
    assert_eq!(p.num_limbs(), primes.len());
    let n = p.n();
    let mut total = 2 + primes.len();
    for (limb, &q) in p.limbs().zip(primes) {
        let max = limb.iter().map(|v| v.to_u64()).max().unwrap_or(0);
        let w = (64 - max.leading_zeros()).max(1) as usize;
        let b = prime_bits(q);
        assert!(
            w == b || w + 1 == b,
            "limb of a {b}-bit prime packs at {w} bits"
        );
        total += n * w / 8;
    }
    total
}

/// Exact serialized size of a ciphertext from its polynomials, and a check against the
/// prime-width estimate (at most one bit per coefficient less).
fn check_ct_size<W: Word>(ct: &Ciphertext<W>, primes: &[u64], len: usize) {
    let polys = if ct.is_seeded() { 1 } else { ct.size() };
    let seed = if ct.is_seeded() { 32 } else { 0 };
    let exact: usize = ct.polys()[..polys]
        .iter()
        .map(|p| packed_len_of(p, primes))
        .sum();
    assert_eq!(len, FRAME + CT_META + seed + exact);
    let n = ct.polys()[0].n();
    let most = FRAME + CT_META + seed + polys * packed_poly_len(n, primes);
    assert!(len <= most && len + polys * primes.len() * n / 8 >= most);
}

/// Bytes of the ciphertext's polynomials as raw words in memory.
fn raw_len<W: Word>(ct: &Ciphertext<W>) -> usize {
    ct.polys()
        .iter()
        .map(|p| p.as_slice().len() * W::BITS as usize / 8)
        .sum()
}

const CT_META: usize = 2 + 1 + 1 + 1 + 4 + 8;

// ----- round trips -----

fn ciphertext_public_key<W: Word>(s: &Setup<W>) {
    let x = rand_vec(1, s.ctx.params().slots());
    let ct = s.enc.encrypt(&x, &s.keys.public_key).expect("encrypt");
    assert!(!ct.is_seeded());
    let bytes = ct.to_bytes();
    assert_eq!(peek_kind(&bytes).expect("peek"), ObjectKind::Ciphertext);
    let back = Ciphertext::from_bytes(&s.ctx, &bytes).expect("load");
    same_ct(&ct, &back);
    let a = s.dec.decrypt(&ct).expect("decrypt");
    let b = s.dec.decrypt(&back).expect("decrypt reloaded");
    assert_eq!(a, b);
    assert!(max_err(&b, &x) < BOUND);
    // Packed at (about) the primes' bit lengths.
    let primes = &s.ctx.params().moduli()[..=ct.level()];
    check_ct_size(&ct, primes, bytes.len());
    // And a round trip of the reloaded ciphertext writes the same bytes.
    assert_eq!(back.to_bytes(), bytes);
}
both!(ciphertext_public_key_round_trip, ciphertext_public_key);

fn ciphertext_symmetric<W: Word>(s: &Setup<W>) {
    let x = rand_vec(2, s.ctx.params().slots());
    let ct = s
        .enc
        .encrypt_symmetric(&x, &s.keys.secret_key)
        .expect("encrypt");
    assert!(ct.is_seeded());
    let bytes = ct.to_bytes();
    let back = Ciphertext::from_bytes(&s.ctx, &bytes).expect("load");
    same_ct(&ct, &back);
    assert!(back.is_seeded());
    assert_eq!(s.dec.decrypt(&ct).unwrap(), s.dec.decrypt(&back).unwrap());
    assert!(max_err(&s.dec.decrypt(&back).unwrap(), &x) < BOUND);
    // Seeded: c_0 and 32 bytes instead of c_0 and c_1.
    let primes = &s.ctx.params().moduli()[..=ct.level()];
    check_ct_size(&ct, primes, bytes.len());
    // Once c_1 changes the seed is gone, and the full form is written.
    let neg = s.ev.negate(&ct).expect("negate");
    assert!(!neg.is_seeded());
    let full = neg.to_bytes().len();
    check_ct_size(&neg, primes, full);
    assert!(
        (bytes.len() as f64) < 0.51 * full as f64,
        "seeded {} bytes vs unseeded {full}",
        bytes.len()
    );
    same_ct(
        &neg,
        &Ciphertext::from_bytes(&s.ctx, &neg.to_bytes()).unwrap(),
    );
}
both!(ciphertext_symmetric_round_trip, ciphertext_symmetric);

fn ciphertext_three_polys<W: Word>(s: &Setup<W>) {
    let x = rand_vec(3, s.ctx.params().slots());
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let b = s.enc.encrypt_symmetric(&x, &s.keys.secret_key).unwrap();
    let m = s.ev.multiply(&a, &b).unwrap();
    assert_eq!(m.size(), 3);
    let bytes = m.to_bytes();
    let back = Ciphertext::from_bytes(&s.ctx, &bytes).expect("load");
    same_ct(&m, &back);
    assert_eq!(s.dec.decrypt(&m).unwrap(), s.dec.decrypt(&back).unwrap());
    let primes = &s.ctx.params().moduli()[..=m.level()];
    check_ct_size(&m, primes, bytes.len());
    // A rescaled ciphertext one level down.
    let r = s.ev.rescale(&s.ev.relinearize(&m).unwrap()).unwrap();
    let back = Ciphertext::from_bytes(&s.ctx, &r.to_bytes()).expect("load rescaled");
    same_ct(&r, &back);
    let prod: Vec<f64> = x.iter().map(|v| v * v).collect();
    assert!(max_err(&s.dec.decrypt(&back).unwrap(), &prod) < BOUND);
}
both!(ciphertext_three_polys_round_trip, ciphertext_three_polys);

/// Writes `$obj`, checks that the bytes say `ObjectKind::$ty` and loads them back as a `$ty`
/// for `$ctx`: `(bytes, loaded copy)`.
macro_rules! write_load {
    ($ty:ident, $obj:expr, $ctx:expr) => {{
        let bytes = $obj.to_bytes();
        assert_eq!(peek_kind(&bytes).unwrap(), ObjectKind::$ty);
        let back = $ty::from_bytes($ctx, &bytes).expect("load");
        (bytes, back)
    }};
}

fn plaintext<W: Word>(s: &Setup<W>) {
    let x = rand_vec(4, 100);
    for level in 0..=s.ctx.max_level() {
        let pt = s.ctx.encode_at(&x, level, 2f64.powi(25)).expect("encode");
        let (bytes, back) = write_load!(Plaintext, pt, &s.ctx);
        assert!(pt.poly() == back.poly());
        assert_eq!(pt.level(), back.level());
        assert_eq!(pt.slots(), back.slots());
        assert_eq!(pt.scale().to_bits(), back.scale().to_bits());
        assert_eq!(s.ctx.decode(&pt).unwrap(), s.ctx.decode(&back).unwrap());
        assert_eq!(back.to_bytes(), bytes);
    }
}
both!(plaintext_round_trip, plaintext);

fn public_key<W: Word>(s: &Setup<W>) {
    let pk = &s.keys.public_key;
    let (bytes, back) = write_load!(PublicKey, pk, &s.ctx);
    assert_eq!(back.fingerprint(), pk.fingerprint());
    assert_eq!(back.to_bytes(), bytes);
    // b packed, a as a seed.
    let p = s.ctx.params();
    let all: Vec<u64> = p.qp_moduli().collect();
    let most = FRAME + 32 + packed_poly_len(s.ctx.n(), &all);
    assert!(bytes.len() <= most && bytes.len() + all.len() * s.ctx.n() / 8 >= most);
    // Encrypting with the reloaded key decrypts (a wrong a would give noise).
    let x = rand_vec(5, p.slots());
    let ct = s.enc.encrypt(&x, &back).expect("encrypt with reloaded key");
    assert!(max_err(&s.dec.decrypt(&ct).unwrap(), &x) < BOUND);
    // At a lower level too (the key is cut down to q_0..q_l, P).
    let pt = s.ctx.encode_at(&x, 0, p.scale()).unwrap();
    let ct = s.enc.encrypt_plaintext(&pt, &back).unwrap();
    assert!(max_err(&s.dec.decrypt(&ct).unwrap(), &x) < BOUND);
}
both!(public_key_round_trip, public_key);

fn evaluation_keys<W: Word>(s: &Setup<W>) {
    let ek = &s.keys.evaluation_keys;
    let (bytes, back) = write_load!(EvaluationKeys, ek, &s.ctx);
    assert_eq!(back.galois_elements(), ek.galois_elements());
    assert!(back.has_relin());
    assert_eq!(back.memory_bytes(), ek.memory_bytes());
    assert_eq!(back.to_bytes(), bytes);
    // Seeded a_j and packed b_j: about half of the in-memory size, times bits/word.
    assert!(bytes.len() < ek.memory_bytes() / 2 + 4096);
    let ev2 = Evaluator::new(&s.ctx, Arc::new(back)).unwrap();
    let x = rand_vec(6, s.ctx.params().slots());
    let a = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let m = s.ev.multiply(&a, &a).unwrap();
    let r1 = s.ev.relinearize(&m).unwrap();
    let r2 = ev2.relinearize(&m).unwrap();
    same_ct(&r1, &r2);
    for step in STEPS {
        same_ct(
            &s.ev.rotate(&a, step).unwrap(),
            &ev2.rotate(&a, step).unwrap(),
        );
    }
    same_ct(&s.ev.conjugate(&a).unwrap(), &ev2.conjugate(&a).unwrap());
    let sq: Vec<f64> = x.iter().map(|v| v * v).collect();
    let got = s.dec.decrypt(&ev2.rescale(&r2).unwrap()).unwrap();
    assert!(max_err(&got, &sq) < BOUND);

    // A lone switching key (the relinearization key), into an empty key set.
    let rk = ek.relin_key().unwrap();
    let kb = rk.to_bytes();
    assert_eq!(peek_kind(&kb).unwrap(), ObjectKind::SwitchingKey);
    let rk2 = SwitchingKey::from_bytes(&s.ctx, &kb).expect("load switching key");
    assert_eq!(rk2.dnum(), rk.dnum());
    assert_eq!(rk2.to_bytes(), kb);
    let mut only = EvaluationKeys::empty(&s.ctx);
    only.insert_relin(rk2).unwrap();
    let ev3 = Evaluator::new(&s.ctx, Arc::new(only)).unwrap();
    same_ct(&r1, &ev3.relinearize(&m).unwrap());

    // No keys at all.
    let empty = EvaluationKeys::empty(&s.ctx);
    let eb = empty.to_bytes();
    assert_eq!(eb.len(), FRAME + 5);
    let e2 = EvaluationKeys::from_bytes(&s.ctx, &eb).unwrap();
    assert!(!e2.has_relin() && e2.galois_elements().is_empty());
}
both!(evaluation_keys_round_trip, evaluation_keys);

#[test]
fn parameters_round_trip() {
    let sets = [
        p32(),
        p64(),
        CkksParameters::builder(1 << 13)
            .levels(1)
            .security(SecurityLevel::Bits192)
            .build()
            .unwrap(),
        CkksParameters::builder(1 << 11)
            .word_bits(32)
            .prime_bits(vec![30, 25, 25, 25])
            .special_count(2)
            .scale_bits(25)
            .secret(SecretDistribution::FixedHamming(64))
            .security(SecurityLevel::None)
            .build()
            .unwrap(),
    ];
    for p in sets {
        let bytes = p.to_bytes();
        assert_eq!(peek_kind(&bytes).unwrap(), ObjectKind::Parameters);
        let back = CkksParameters::from_bytes(&bytes).expect("load parameters");
        assert_eq!(back, p);
        assert_eq!(back.fingerprint(), p.fingerprint());
        assert_eq!(back.to_bytes(), bytes);
        // A context from the reloaded parameters reads objects of the original one.
        if p.fingerprint() == s64().ctx.fingerprint() {
            let ctx = Context::<u64>::new(back).unwrap();
            let s = s64();
            let ct = s.enc.encrypt(&[0.5], &s.keys.public_key).unwrap();
            Ciphertext::from_bytes(&ctx, &ct.to_bytes()).expect("same fingerprint");
        }
    }
}

/// Prints the sizes of a ciphertext (raw words, packed, seeded) for both word sizes: run with
/// `--nocapture` to see them.
fn sizes<W: Word>(s: &Setup<W>) {
    let x = rand_vec(7, s.ctx.params().slots());
    let ct = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let sym = s.enc.encrypt_symmetric(&x, &s.keys.secret_key).unwrap();
    let raw = raw_len(&ct);
    let packed = ct.to_bytes().len();
    let seeded = sym.to_bytes().len();
    let bits: Vec<usize> = s
        .ctx
        .params()
        .moduli()
        .iter()
        .map(|&q| prime_bits(q))
        .collect();
    eprintln!(
        "N = {}, u{} words, primes of {:?} bits: ciphertext raw {raw} B, packed {packed} B ({:.3} of raw), seeded {seeded} B ({:.3} of raw); public key {} B; evaluation keys {} B (in memory {} B)",
        s.ctx.n(),
        W::BITS,
        bits,
        packed as f64 / raw as f64,
        seeded as f64 / raw as f64,
        s.keys.public_key.to_bytes().len(),
        s.keys.evaluation_keys.to_bytes().len(),
        s.keys.evaluation_keys.memory_bytes(),
    );
    let ratio = bits.iter().sum::<usize>() as f64 / (bits.len() as f64 * f64::from(W::BITS));
    assert!((packed as f64 / raw as f64) < ratio + 0.01);
    assert!((seeded as f64 / raw as f64) < ratio / 2.0 + 0.01);
}
both!(sizes_against_packed_estimate, sizes);

// ----- bad inputs -----

fn patch_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Recomputes the checksum after a deliberate change, so that the field checks behind it are
/// what a test reaches (objects shorter than a checksum are left alone).
fn reseal(bytes: &mut [u8]) {
    if bytes.len() >= FRAME {
        let end = bytes.len() - CHECKSUM_LEN;
        let sum = xxh3_64(&bytes[..end]);
        bytes[end..].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Sets the header's payload length to what the bytes hold, then reseals.
fn patch_len(bytes: &mut [u8]) {
    let len = bytes.len().saturating_sub(FRAME) as u64;
    patch_u64(bytes, 24, len);
    reseal(bytes);
}

/// A copy of `b`, resealed.
fn sealed(b: &[u8]) -> Vec<u8> {
    let mut b = b.to_vec();
    reseal(&mut b);
    b
}

fn header_errors<W: Word>(s: &Setup<W>) {
    let ct = s.enc.encrypt(&[0.25], &s.keys.public_key).unwrap();
    let good = ct.to_bytes();
    let load = |b: &[u8]| Ciphertext::from_bytes(&s.ctx, &sealed(b));
    let info = peek_header(&good).unwrap();
    assert_eq!(info.kind, ObjectKind::Ciphertext);
    assert_eq!(info.word_bits, W::BITS);
    assert_eq!(info.params_fingerprint, s.ctx.fingerprint());
    assert_eq!(info.payload_len as usize, good.len() - FRAME);

    // Any change without a new checksum is caught by the checksum.
    for at in [
        8,
        16,
        HEADER_LEN,
        good.len() / 2,
        good.len() - CHECKSUM_LEN - 1,
    ] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        let m = format_msg(Ciphertext::from_bytes(&s.ctx, &b));
        assert!(m.contains("checksum mismatch"), "{m}");
    }
    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(format_msg(Ciphertext::from_bytes(&s.ctx, &b)).contains("checksum mismatch"));
    // The report: the last 8 bytes overwritten with 0xff.
    let mut b = good.clone();
    let end = b.len();
    b[end - 8..].fill(0xff);
    assert!(format_msg(Ciphertext::from_bytes(&s.ctx, &b)).contains("checksum mismatch"));
    // A resealed change of a meaning field that the payload does not repeat: the object
    // fingerprint disagrees.
    let mut b = good.clone();
    b[16] ^= 1;
    assert!(format_msg(load(&b)).contains("object fingerprint"));

    let mut b = good.clone();
    b[0] ^= 1;
    assert!(format_msg(load(&b)).contains("magic"));
    assert!(format_msg(peek_kind(&b)).contains("magic"));
    assert!(format_msg(load(b"")).contains("magic"));
    assert!(format_msg(load(b"HEL")).contains("magic"));

    let mut b = good.clone();
    b[4..6].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let m = format_msg(load(&b));
    assert!(m.contains("version 3") && m.contains("version 2"), "{m}");
    assert!(format_msg(peek_kind(&b)).contains("version"));
    let mut b = good.clone();
    b[4..6].copy_from_slice(&1u16.to_le_bytes());
    let m = format_msg(load(&b));
    assert!(m.contains("version 1") && m.contains("upgrade_v1"), "{m}");

    let mut b = good.clone();
    b[6] = 9;
    assert!(format_msg(load(&b)).contains("unknown object kind 9"));
    b[6] = 0;
    assert!(format_msg(peek_kind(&b)).contains("unknown object kind 0"));

    // A plaintext is not a ciphertext, and the other way round.
    let pt = s.ctx.encode(&[0.25]).unwrap().to_bytes();
    assert!(format_msg(load(&pt)).contains("not a Ciphertext"));
    assert!(format_msg(Plaintext::from_bytes(&s.ctx, &good)).contains("not a Plaintext"));
    assert!(format_msg(CkksParameters::from_bytes(&good)).contains("not a CkksParameters"));
    let pk = s.keys.public_key.to_bytes();
    assert!(format_msg(EvaluationKeys::from_bytes(&s.ctx, &pk)).contains("PublicKey"));

    let mut b = good.clone();
    b[7] = 48;
    assert!(format_msg(load(&b)).contains("word size 48"));

    let mut b = good.clone();
    patch_u64(&mut b, 8, ct.fingerprint() ^ 1);
    assert!(mismatch_msg(load(&b)).contains("made for other parameters"));

    // Absurd payload length, short payload, trailing bytes.
    let mut b = good.clone();
    patch_u64(&mut b, 24, u64::MAX);
    assert!(format_msg(load(&b)).contains("limit"));
    let mut b = good.clone();
    patch_u64(&mut b, 24, MAX_PAYLOAD_BYTES);
    assert!(format_msg(load(&b)).contains("truncated"));
    // A bare header that declares 2^40 bytes is refused before anything is allocated.
    let mut b = good[..FRAME].to_vec();
    patch_u64(&mut b, 24, MAX_PAYLOAD_BYTES);
    assert!(format_msg(load(&b)).contains("truncated"));
    let mut b = good.clone();
    b.push(0);
    assert!(format_msg(load(&b)).contains("1 trailing bytes"));
    // Trailing bytes covered by the declared length: the payload has unused bytes.
    patch_len(&mut b);
    assert!(format_msg(load(&b)).contains("unused bytes"));
    let mut b = good.clone();
    b.truncate(b.len() - 1);
    assert!(format_msg(load(&b)).contains("truncated"));
    assert!(load(&good).is_ok());
}
both!(bad_headers, header_errors);

#[test]
fn wrong_word_size() {
    let a = s32().enc.encrypt(&[0.5], &s32().keys.public_key).unwrap();
    let b = s64().enc.encrypt(&[0.5], &s64().keys.public_key).unwrap();
    let m = mismatch_msg(Ciphertext::from_bytes(&s64().ctx, &a.to_bytes()));
    assert!(
        m.contains("32-bit words") && m.contains("Context<u32>"),
        "{m}"
    );
    let m = mismatch_msg(Ciphertext::from_bytes(&s32().ctx, &b.to_bytes()));
    assert!(m.contains("64-bit words"), "{m}");
    let m = mismatch_msg(EvaluationKeys::from_bytes(
        &s32().ctx,
        &s64().keys.evaluation_keys.to_bytes(),
    ));
    assert!(m.contains("64-bit words"), "{m}");
}

#[test]
fn wrong_parameters() {
    // Same word size and degree, one level fewer.
    let other = Context::<u64>::new(CkksParameters::new(1 << 13, 1, 40, 64).unwrap()).unwrap();
    let s = s64();
    let ct = s.enc.encrypt(&[0.5], &s.keys.public_key).unwrap();
    let m = mismatch_msg(Ciphertext::from_bytes(&other, &ct.to_bytes()));
    assert!(m.contains("made for other parameters"), "{m}");
    let m = mismatch_msg(PublicKey::from_bytes(&other, &s.keys.public_key.to_bytes()));
    assert!(m.contains("made for other parameters"), "{m}");
    let m = mismatch_msg(SwitchingKey::from_bytes(
        &other,
        &s.keys.evaluation_keys.relin_key().unwrap().to_bytes(),
    ));
    assert!(m.contains("made for other parameters"), "{m}");
    let pt = s.ctx.encode(&[0.5]).unwrap();
    let m = mismatch_msg(Plaintext::from_bytes(&other, &pt.to_bytes()));
    assert!(m.contains("made for other parameters"), "{m}");
}

/// Offsets in a ciphertext: level at 32, size 34, form 35, flags 36, slots 37, scale 41,
/// then (unseeded) the first polynomial: limbs 49, widths 51.., coefficients after.
const CT_LEVEL: usize = 32;
const CT_SIZE: usize = 34;
const CT_FORM: usize = 35;
const CT_FLAGS: usize = 36;
const CT_SLOTS: usize = 37;
const CT_SCALE: usize = 41;
const CT_POLY: usize = 49;

/// Writes `v` into the `w`-bit field at bit offset 0 of `bytes[at..]` (little-endian bits).
fn write_bits(bytes: &mut [u8], at: usize, w: usize, v: u64) {
    let mut x = u128::from_le_bytes(bytes[at..at + 16].try_into().unwrap());
    let mask = (1u128 << w) - 1;
    x = (x & !mask) | u128::from(v);
    bytes[at..at + 16].copy_from_slice(&x.to_le_bytes());
}

fn field_errors<W: Word>(s: &Setup<W>) {
    let x = rand_vec(9, 8);
    let ct = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let good = ct.to_bytes();
    let load = |b: &[u8]| Ciphertext::from_bytes(&s.ctx, &sealed(b));
    let limbs = ct.level() + 1;
    let q = s.ctx.params().moduli();

    let mut b = good.clone();
    b[CT_LEVEL..CT_LEVEL + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(format_msg(load(&b)).contains("level 65535"));
    // A lower (existing) level: the limb count no longer matches.
    let mut b = good.clone();
    b[CT_LEVEL] = 0;
    let m = format_msg(load(&b));
    assert!(m.contains(&format!("has {limbs} limbs but needs 1")), "{m}");

    for size in [0u8, 1, 4, 200] {
        let mut b = good.clone();
        b[CT_SIZE] = size;
        assert!(format_msg(load(&b)).contains(&format!("{size} polynomials")));
    }
    for form in [0u8, 2] {
        let mut b = good.clone();
        b[CT_FORM] = form;
        assert!(format_msg(load(&b)).contains(&format!("form {form}")));
    }
    let mut b = good.clone();
    b[CT_FLAGS] = 2;
    assert!(format_msg(load(&b)).contains("flags"));
    // Seeded flag on a ciphertext without a seed: the bytes do not line up any more.
    let mut b = good.clone();
    b[CT_FLAGS] = 1;
    assert!(load(&b).is_err());

    for slots in [0u32, 3, 1 << 20] {
        let mut b = good.clone();
        b[CT_SLOTS..CT_SLOTS + 4].copy_from_slice(&slots.to_le_bytes());
        assert!(format_msg(load(&b)).contains(&format!("{slots} slots")));
    }
    for scale in [f64::NAN, f64::INFINITY, 0.5, -1.0, 2f64.powi(1000)] {
        let mut b = good.clone();
        b[CT_SCALE..CT_SCALE + 8].copy_from_slice(&scale.to_le_bytes());
        assert!(format_msg(load(&b)).contains("scale"));
    }

    // Limb count, widths, coefficients.
    let mut b = good.clone();
    b[CT_POLY] = 99;
    assert!(format_msg(load(&b)).contains("99 limbs"));
    let widths = CT_POLY + 2;
    let data = widths + limbs;
    let w0 = prime_bits(q[0]);
    assert_eq!(usize::from(good[widths]), w0);
    let mut b = good.clone();
    b[widths] = (w0 + 1) as u8;
    let m = format_msg(load(&b));
    assert!(
        m.contains(&format!("limb 0 is packed at {} bits", w0 + 1)),
        "{m}"
    );
    let mut b = good.clone();
    b[widths] = 0;
    assert!(format_msg(load(&b)).contains("packed at 0 bits"));
    // A narrower width is valid in principle; the byte counts then no longer match.
    let mut b = good.clone();
    b[widths] = (w0 - 1) as u8;
    format_msg(load(&b));

    let mut b = good.clone();
    write_bits(&mut b, data, w0, q[0]);
    let m = format_msg(load(&b));
    assert!(
        m.contains(&format!(
            "limb 0 coefficient 0 holds {} which is not below its prime {}",
            q[0], q[0]
        )),
        "{m}"
    );
    let mut b = good.clone();
    write_bits(&mut b, data, w0, (1 << w0) - 1);
    assert!(format_msg(load(&b)).contains("not below its prime"));
    // The largest valid value is accepted.
    let mut b = good.clone();
    write_bits(&mut b, data, w0, q[0] - 1);
    let ok = load(&b).expect("q - 1 is a valid coefficient");
    assert_eq!(ok.polys()[0].limb(0)[0].to_u64(), q[0] - 1);
    // The last coefficient of the last limb of the last polynomial.
    let mut b = good.clone();
    let wl = prime_bits(q[limbs - 1]);
    let n = s.ctx.n();
    let end = b.len() - CHECKSUM_LEN;
    let mut tail = u128::from_le_bytes(b[end - 16..end].try_into().unwrap());
    let shift = 128 - wl;
    tail = (tail & ((1u128 << shift) - 1)) | (u128::from(q[limbs - 1]) << shift);
    b[end - 16..end].copy_from_slice(&tail.to_le_bytes());
    let m = format_msg(load(&b));
    assert!(
        m.contains(&format!(
            "polynomial 1 limb {} coefficient {}",
            limbs - 1,
            n - 1
        )),
        "{m}"
    );
}
both!(bad_fields, field_errors);

fn key_errors<W: Word>(s: &Setup<W>) {
    let ek = &s.keys.evaluation_keys;
    let good = ek.to_bytes();
    let load = |b: &[u8]| EvaluationKeys::from_bytes(&s.ctx, &sealed(b));
    let rk_len = ek.relin_key().unwrap().to_bytes().len() - FRAME;
    // The first Galois key's own length: polynomials are packed at each limb's bit width, so
    // two keys' lengths can differ (a limb of random values sometimes needs a bit less).
    let first_galois = ek.galois_elements()[0];
    let gk_len = ek.galois_key(first_galois).unwrap().to_bytes().len() - FRAME;
    let two_n = 2 * s.ctx.n() as u64;
    // Payload: flags at 32, count 33..37, the relinearization key from 37 (role, dnum, ...).
    let mut b = good.clone();
    b[32] = 3;
    assert!(format_msg(load(&b)).contains("flags"));
    let mut b = good.clone();
    b[33..37].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(format_msg(load(&b)).contains("4294967295 Galois keys"));
    let mut b = good.clone();
    b[33..37].copy_from_slice(&1000u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("1000 Galois keys"));
    // Relinearization key role and dnum.
    assert_eq!(good[37], 1);
    let mut b = good.clone();
    b[37] = 0;
    assert!(format_msg(load(&b)).contains("relinearization key slot"));
    let mut b = good.clone();
    b[37] = 9;
    assert!(format_msg(load(&b)).contains("role 9"));
    let mut b = good.clone();
    b[38] ^= 0x40;
    assert!(format_msg(load(&b)).contains("digits"));

    let g0 = 37 + rk_len;
    let elements = ek.galois_elements();
    assert!(elements.len() >= 2);
    assert_eq!(good[g0], 2);
    assert_eq!(
        u64::from_le_bytes(good[g0 + 1..g0 + 9].try_into().unwrap()),
        elements[0]
    );
    for bad in [0, 2, two_n, two_n + 1, u64::MAX] {
        let mut b = good.clone();
        patch_u64(&mut b, g0 + 1, bad);
        let m = format_msg(load(&b));
        assert!(
            m.contains(&format!("element {bad}")) && m.contains("odd"),
            "{m}"
        );
    }
    // A valid element that does not match the stored step.
    let mut b = good.clone();
    patch_u64(&mut b, g0 + 1, elements[1]);
    let m = format_msg(load(&b));
    assert!(m.contains("stored rotation"), "{m}");
    // A step out of range, a conjugation flag that is not 0 or 1.
    let mut b = good.clone();
    b[g0 + 9..g0 + 13].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(format_msg(load(&b)).contains("rotation step"));
    let mut b = good.clone();
    b[g0 + 13] = 2;
    assert!(format_msg(load(&b)).contains("conjugation flag 2"));
    // A Galois slot holding a relinearization key.
    let mut b = good.clone();
    b[g0] = 1;
    assert!(load(&b).is_err());
    // Second element (and its step) equal to the first: a duplicate.
    let g1 = g0 + gk_len;
    assert_eq!(
        u64::from_le_bytes(good[g1 + 1..g1 + 9].try_into().unwrap()),
        elements[1]
    );
    let mut b = good.clone();
    b[g1 + 1..g1 + 14].copy_from_slice(&good[g0 + 1..g0 + 14]);
    assert!(format_msg(load(&b)).contains("does not follow"));

    // Public key and switching key limb counts.
    let pk = s.keys.public_key.to_bytes();
    let mut b = pk.clone();
    b[32 + 32] ^= 1;
    assert!(format_msg(PublicKey::from_bytes(&s.ctx, &sealed(&b))).contains("limbs"));
    let sk = ek.relin_key().unwrap().to_bytes();
    let mut b = sk.clone();
    b[32 + 1 + 2 + 32] ^= 1;
    assert!(format_msg(SwitchingKey::from_bytes(&s.ctx, &sealed(&b))).contains("limbs"));
    // A lone switching key keeps its role, and a key cannot join in another role.
    let k = SwitchingKey::from_bytes(&s.ctx, &sk).unwrap();
    assert_eq!(k.role(), KeyRole::Relinearization);
    let mut only = EvaluationKeys::empty(&s.ctx);
    assert!(matches!(
        only.insert_galois(elements[0], k.clone()),
        Err(CkksError::InvalidInput(_))
    ));
    let gk = ek.galois_key(elements[0]).unwrap().clone();
    assert_eq!(gk.role(), KeyRole::Galois(elements[0]));
    assert!(only.insert_galois(elements[1], gk.clone()).is_err());
    assert!(only.insert_relin(gk.clone()).is_err());
    only.insert_galois(elements[0], gk).unwrap();
    only.insert_relin(k).unwrap();
}
both!(bad_keys, key_errors);

#[test]
fn bad_parameters() {
    let good = p64().to_bytes();
    let load = |b: &[u8]| CkksParameters::from_bytes(&sealed(b));
    // n at 32, #q at 36, the first prime from 38.
    let mut b = good.clone();
    b[32..36].copy_from_slice(&3u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("stored parameters are rejected"));
    let mut b = good.clone();
    b[36..38].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(format_msg(load(&b)).contains("65535 ciphertext primes"));
    let mut b = good.clone();
    b[36..38].copy_from_slice(&0u16.to_le_bytes());
    assert!(format_msg(load(&b)).contains("0 ciphertext primes"));
    // A prime changed by 2: not prime or not NTT-friendly, or (if it still is) the
    // fingerprint no longer matches.
    let mut b = good.clone();
    b[38] ^= 2;
    assert!(format_msg(load(&b)).contains("parameters"));
    // Security, secret distribution (the payload ends 8 bytes before the object).
    let end = good.len() - CHECKSUM_LEN;
    let mut b = good.clone();
    b[end - 7] = 77;
    assert!(format_msg(load(&b)).contains("security level"));
    let mut b = good.clone();
    b[end - 5] = 2;
    assert!(format_msg(load(&b)).contains("secret distribution 2"));
    // Fingerprint: a valid but different security level or secret distribution changes it.
    let mut b = good.clone();
    b[8] ^= 1;
    assert!(format_msg(load(&b)).contains("fingerprint"));
    let mut b = good.clone();
    b[end - 7..end - 5].copy_from_slice(&0u16.to_le_bytes());
    assert!(format_msg(load(&b)).contains("fingerprint"));
    // Insecure parameters are refused even when well formed.
    let loose = CkksParameters::builder(1 << 10)
        .levels(3)
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    let mut b = loose.to_bytes();
    let end = b.len() - CHECKSUM_LEN;
    b[end - 7..end - 5].copy_from_slice(&128u16.to_le_bytes());
    let m = format_msg(load(&b));
    assert!(m.contains("insecure"), "{m}");
}

/// Every prefix of small objects fails with a format error, both as is (the header's length
/// no longer matches) and with the length patched to the prefix (the payload is cut short).
#[test]
fn truncated_at_every_length() {
    let corpus = fuzz_bodies::seed_corpus();
    let c32 = fuzz_bodies::ctx32();
    let c64 = fuzz_bodies::ctx64();
    let mut checked = 0usize;
    for (target, bytes) in &corpus {
        if !matches!(*target, "params" | "ciphertext" | "plaintext") {
            continue;
        }
        let load = |b: &[u8]| -> Result<()> {
            match (*target, b.get(7)) {
                ("params", _) => CkksParameters::from_bytes(b).map(drop),
                ("ciphertext", Some(32)) => Ciphertext::from_bytes(c32, b).map(drop),
                ("ciphertext", _) => Ciphertext::from_bytes(c64, b).map(drop),
                ("plaintext", Some(32)) => Plaintext::from_bytes(c32, b).map(drop),
                _ => Plaintext::from_bytes(c64, b).map(drop),
            }
        };
        load(bytes).expect("the untruncated object loads");
        for len in 0..bytes.len() {
            format_msg(load(&bytes[..len]));
            if len >= FRAME {
                let mut b = bytes[..len].to_vec();
                patch_len(&mut b);
                format_msg(load(&b));
            }
            checked += 1;
        }
    }
    assert!(checked > 10_000);
}

// ----- fuzz-like -----

/// What a mutation did.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mutation {
    /// Bit flip at this offset.
    Flip(usize),
    /// Byte overwrite at this offset.
    Overwrite(usize),
    /// Truncation to this length.
    Truncate(usize),
    /// Bytes inserted at this offset.
    Insert(usize),
    /// Truncation or insertion with the header's length patched to match.
    Patched(usize),
}

fn mutate(rng: &mut ChaCha8Rng, bytes: &[u8]) -> (Vec<u8>, Mutation) {
    let mut b = bytes.to_vec();
    // Half the mutations hit the header and the fields after it.
    let at = if rng.gen_bool(0.5) {
        rng.gen_range(0..b.len().min(96))
    } else {
        rng.gen_range(0..b.len())
    };
    let m = match rng.gen_range(0..5) {
        0 => {
            b[at] ^= 1 << rng.gen_range(0..8);
            Mutation::Flip(at)
        }
        1 => {
            let mut v: u8 = match rng.gen_range(0..4) {
                0 => 0,
                1 => 0xff,
                _ => rng.gen(),
            };
            if b[at] == v {
                v ^= 0x80;
            }
            b[at] = v;
            Mutation::Overwrite(at)
        }
        2 => {
            b.truncate(at);
            Mutation::Truncate(at)
        }
        3 => {
            let k = rng.gen_range(1..16);
            let extra: Vec<u8> = (0..k).map(|_| rng.gen()).collect();
            b.splice(at..at, extra);
            Mutation::Insert(at)
        }
        _ => {
            if rng.gen_bool(0.5) {
                b.truncate(at.max(HEADER_LEN));
            } else {
                let k = rng.gen_range(1..64);
                let extra: Vec<u8> = (0..k).map(|_| rng.gen()).collect();
                let at = at.max(HEADER_LEN);
                b.splice(at..at, extra);
            }
            patch_len(&mut b);
            Mutation::Patched(at)
        }
    };
    (b, m)
}

/// Loads `b` as the kind of fuzz target `target` for the word size of the seed `w32`.
fn load_as(target: &str, w32: bool, b: &[u8]) -> Result<Vec<u8>> {
    let c32 = fuzz_bodies::ctx32();
    let c64 = fuzz_bodies::ctx64();
    Ok(match (target, w32) {
        ("params", _) => CkksParameters::from_bytes(b)?.to_bytes(),
        ("ciphertext", true) => Ciphertext::from_bytes(c32, b)?.to_bytes(),
        ("ciphertext", false) => Ciphertext::from_bytes(c64, b)?.to_bytes(),
        ("plaintext", true) => Plaintext::from_bytes(c32, b)?.to_bytes(),
        ("plaintext", false) => Plaintext::from_bytes(c64, b)?.to_bytes(),
        ("public_key", true) => PublicKey::from_bytes(c32, b)?.to_bytes(),
        ("public_key", false) => PublicKey::from_bytes(c64, b)?.to_bytes(),
        ("switching_key", true) => SwitchingKey::from_bytes(c32, b)?.to_bytes(),
        ("switching_key", false) => SwitchingKey::from_bytes(c64, b)?.to_bytes(),
        ("evaluation_keys", true) => EvaluationKeys::from_bytes(c32, b)?.to_bytes(),
        ("evaluation_keys", false) => EvaluationKeys::from_bytes(c64, b)?.to_bytes(),
        ("secret_key", true) => SecretKey::from_bytes(c32, b)?.to_bytes(),
        ("secret_key", false) => SecretKey::from_bytes(c64, b)?.to_bytes(),
        _ => unreachable!("unknown target {target}"),
    })
}

/// 2000 random mutations of valid objects of every kind and both word sizes: nothing panics,
/// and nothing but a mutation whose length and checksum were patched to match (what only a
/// deliberate forger does) gets past the checksum; such a forgery loads only as an object
/// that round-trips.
#[test]
fn random_mutations_never_panic() {
    let corpus = fuzz_bodies::seed_corpus();
    let mut rng = ChaCha8Rng::seed_from_u64(0x4845_4c4d);
    let (mut forged, mut errors) = (0usize, 0usize);
    for i in 0..2000 {
        let (target, bytes) = &corpus[i % corpus.len()];
        let (b, m) = mutate(&mut rng, bytes);
        match load_as(target, bytes[7] == 32, &b) {
            Ok(_) => {
                assert!(
                    matches!(m, Mutation::Patched(_)),
                    "{target}: {m:?} got past the checksum"
                );
                forged += 1;
            }
            Err(CkksError::Format(_)) | Err(CkksError::ParameterMismatch(_)) => errors += 1,
            Err(e) => panic!("{target}: {m:?} gave an unexpected error kind: {e:?}"),
        }
        // The fuzz target's body on the same input (round-trip oracle, no panic).
        let body = fuzz_bodies::body_by_name(target).expect("known target");
        body(&b);
    }
    assert!(
        errors + forged == 2000 && errors > 1900,
        "forged {forged}, errors {errors}"
    );
}

/// Every single-bit flip of every seed object (every kind, both word sizes) is refused with a
/// format error.
#[test]
fn every_single_bit_flip_is_refused() {
    let mut flips = 0usize;
    for (target, bytes) in fuzz_bodies::seed_corpus() {
        let w32 = bytes[7] == 32;
        let mut b = bytes.clone();
        for at in 0..b.len() {
            for bit in 0..8 {
                b[at] ^= 1 << bit;
                match load_as(target, w32, &b) {
                    Err(CkksError::Format(_)) => {}
                    other => panic!(
                        "{target}: flipping bit {bit} of byte {at} gave {:?}",
                        other.map(|v| v.len())
                    ),
                }
                b[at] ^= 1 << bit;
                flips += 1;
            }
        }
    }
    assert!(flips > 1_000_000, "{flips} flips");
}

/// Splices of two valid objects of the same kind and word size (a prefix of one, a suffix of
/// the other) either fail or are one of the two.
#[test]
fn splices_of_two_objects() {
    let corpus = fuzz_bodies::seed_corpus();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut checked = 0usize;
    for (ta, a) in &corpus {
        for (tb, b) in &corpus {
            if ta != tb || a[7] != b[7] || a == b {
                continue;
            }
            for _ in 0..500 {
                let i = rng.gen_range(0..=a.len());
                let j = if rng.gen_bool(0.5) {
                    i.min(b.len())
                } else {
                    rng.gen_range(0..=b.len())
                };
                let mut x = a[..i].to_vec();
                x.extend_from_slice(&b[j..]);
                match load_as(ta, a[7] == 32, &x) {
                    Ok(y) => assert!(
                        y == *a || y == *b,
                        "{ta}: a splice loaded as a third object"
                    ),
                    Err(CkksError::Format(_)) | Err(CkksError::ParameterMismatch(_)) => {}
                    Err(e) => panic!("{ta}: unexpected error kind {e:?}"),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 5_000, "{checked} splices");
}

/// The committed fuzz corpora (`fuzz/corpus/<target>/`, minimized after each hour-long run,
/// seeds included) and 20 random mutations of each file run through their fuzz bodies: the
/// stable-Rust part of the fuzzing, so that CI replays what the fuzzer found.
#[test]
fn fuzz_bodies_on_committed_corpora() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut rng = ChaCha8Rng::seed_from_u64(0xc0_4795);
    for target in fuzz_bodies::TARGETS {
        let body = fuzz_bodies::body_by_name(target).expect("known target");
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (the corpora are committed)", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: empty corpus", dir.display());
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            body(&bytes);
            // (mutate patches header fields: only whole headers are mutated.)
            for _ in 0..20 {
                if bytes.len() < FRAME {
                    break;
                }
                body(&mutate(&mut rng, &bytes).0);
            }
        }
    }
}

/// Every fuzz body accepts its valid seeds and rejects garbage without panicking.
#[test]
fn fuzz_bodies_on_seeds() {
    for (target, bytes) in fuzz_bodies::seed_corpus() {
        let body = fuzz_bodies::body_by_name(target).expect("known target");
        body(&bytes);
        body(&[]);
        body(&MAGIC);
        body(&bytes[..HEADER_LEN]);
        let kind = peek_kind(&bytes).unwrap();
        assert_eq!(
            fuzz_bodies::TARGETS[usize::from(kind_index(kind))],
            target,
            "seed kind"
        );
    }
    for name in fuzz_bodies::TARGETS {
        assert!(fuzz_bodies::body_by_name(name).is_some());
    }
}

fn kind_index(k: ObjectKind) -> u8 {
    k.code() - 1
}

/// Writes the fuzz seed corpus to `fuzz/corpus/<target>/` when `HELOOM_FUZZ_CORPUS=1`.
#[test]
fn write_fuzz_corpus() {
    if std::env::var("HELOOM_FUZZ_CORPUS").as_deref() != Ok("1") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (i, (target, bytes)) in fuzz_bodies::seed_corpus().into_iter().enumerate() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus directory");
        std::fs::write(dir.join(format!("seed-{i:02}")), bytes).expect("write seed");
    }
}

// ----- secret keys -----

fn secret_key<W: Word>(s: &Setup<W>) {
    let sk = &s.keys.secret_key;
    let bytes = sk.to_bytes();
    assert_eq!(peek_kind(&bytes).unwrap(), ObjectKind::SecretKey);
    // 2 bits per coefficient.
    assert_eq!(bytes.len(), FRAME + 5 + s.ctx.n() / 4);
    let back = SecretKey::from_bytes(&s.ctx, &bytes).expect("load secret key");
    assert_eq!(back.to_bytes(), bytes);
    // The reloaded key decrypts what the original's public key encrypted.
    let x = rand_vec(11, s.ctx.params().slots());
    let ct = s.enc.encrypt(&x, &s.keys.public_key).unwrap();
    let dec = Decryptor::new(&s.ctx, &back).unwrap();
    assert_eq!(dec.decrypt(&ct).unwrap(), s.dec.decrypt(&ct).unwrap());
    assert!(max_err(&dec.decrypt(&ct).unwrap(), &x) < BOUND);

    // Never accepted where a public object is expected.
    let refused = |m: String| {
        assert!(
            m.contains("SecretKey, refused") && m.contains("never leaves the client"),
            "{m}"
        )
    };
    refused(format_msg(PublicKey::from_bytes(&s.ctx, &bytes)));
    refused(format_msg(EvaluationKeys::from_bytes(&s.ctx, &bytes)));
    refused(format_msg(SwitchingKey::from_bytes(&s.ctx, &bytes)));
    refused(format_msg(Ciphertext::from_bytes(&s.ctx, &bytes)));
    refused(format_msg(Plaintext::from_bytes(&s.ctx, &bytes)));
    refused(format_msg(CkksParameters::from_bytes(&bytes)));
    // Nor is a public object a secret key.
    let m = format_msg(SecretKey::from_bytes(&s.ctx, &s.keys.public_key.to_bytes()));
    assert!(m.contains("not a SecretKey"), "{m}");

    // Field checks: reserved byte, a coefficient code of 3, a weight that does not match.
    let load = |b: &[u8]| SecretKey::from_bytes(&s.ctx, &sealed(b));
    let mut b = bytes.clone();
    b[32] = 1;
    assert!(format_msg(load(&b)).contains("reserved"));
    let mut b = bytes.clone();
    b[37] |= 3;
    assert!(format_msg(load(&b)).contains("code 3"));
    let mut b = bytes.clone();
    b[33] ^= 1;
    assert!(format_msg(load(&b)).contains("stored weight"));
}
both!(secret_key_round_trip, secret_key);

#[test]
fn fixed_weight_secret_key() {
    let p = CkksParameters::builder(1 << 11)
        .levels(1)
        .secret(SecretDistribution::FixedHamming(64))
        .security(SecurityLevel::None)
        .build()
        .unwrap();
    let ctx = Context::<u64>::new(p).unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let bytes = keys.secret_key.to_bytes();
    let back = SecretKey::from_bytes(&ctx, &bytes).unwrap();
    assert_eq!(back.to_bytes(), bytes);
    // Move one non-zero coefficient's code onto a zero one: weight 65, refused.
    let mut b = bytes.clone();
    let weight = u32::from_le_bytes(b[33..37].try_into().unwrap());
    assert_eq!(weight, 64);
    b[33..37].copy_from_slice(&65u32.to_le_bytes());
    let zero = (0..ctx.n())
        .find(|&i| (b[37 + i / 4] >> (2 * (i % 4))) & 3 == 0)
        .unwrap();
    b[37 + zero / 4] |= 1 << (2 * (zero % 4));
    let m = format_msg(SecretKey::from_bytes(&ctx, &sealed(&b)));
    assert!(m.contains("fix the weight at 64"), "{m}");
}

// ----- version 1 -----

fn v1(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/v1")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Objects written by format version 1 (committed under `tests/data/v1`, N = 2^10, 64-bit
/// words, the fuzz parameters): `from_bytes` refuses them with an error that names the
/// version and the way out; `upgrade_v1` converts them with every field checked.
#[test]
fn version_1_objects_upgrade() {
    let params_v1 = v1("params64.bin");
    let m = format_msg(CkksParameters::from_bytes(&params_v1));
    assert!(m.contains("version 1") && m.contains("upgrade_v1"), "{m}");
    let params = CkksParameters::from_bytes(&upgrade_v1_params(&params_v1).unwrap()).unwrap();
    assert_eq!(params, fuzz_bodies::small_params(64));
    let ctx = fuzz_bodies::ctx64();
    assert_eq!(upgrade_v1(ctx, &params_v1).unwrap(), params.to_bytes());
    // Already version 2: nothing to upgrade.
    let m = format_msg(upgrade_v1_params(&params.to_bytes()));
    assert!(m.contains("no upgrade is needed"), "{m}");

    for name in [
        "ciphertext64.bin",
        "ciphertext64-seeded.bin",
        "plaintext64.bin",
        "public_key64.bin",
        "switching_key64.bin",
        "evaluation_keys64.bin",
    ] {
        let old = v1(name);
        let kind = peek_kind(&old).unwrap();
        let m = match kind {
            ObjectKind::Ciphertext => format_msg(Ciphertext::from_bytes(ctx, &old)),
            ObjectKind::Plaintext => format_msg(Plaintext::from_bytes(ctx, &old)),
            ObjectKind::PublicKey => format_msg(PublicKey::from_bytes(ctx, &old)),
            ObjectKind::SwitchingKey => format_msg(SwitchingKey::from_bytes(ctx, &old)),
            _ => format_msg(EvaluationKeys::from_bytes(ctx, &old)),
        };
        assert!(m.contains("version 1"), "{name}: {m}");
        let new = upgrade_v1(ctx, &old).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(peek_header(&new).unwrap().kind, kind);
        // The payload is the same apart from the switching keys' new role bytes.
        let same_payload = !matches!(kind, ObjectKind::SwitchingKey | ObjectKind::EvaluationKeys);
        if same_payload {
            assert_eq!(new[HEADER_LEN..new.len() - CHECKSUM_LEN], old[24..]);
        }
        let again = load_as(fuzz_name(kind), false, &new).unwrap();
        assert_eq!(again, new, "{name}");
        // Fields are re-validated: an impossible first payload field is refused (a corrupted
        // coefficient that stays below its prime cannot be seen without a checksum: that is
        // why from_bytes refuses version 1).
        // (A public key's payload starts with its seed, where any bytes are valid.)
        if kind != ObjectKind::PublicKey {
            let mut bad = old.clone();
            bad[24..26].copy_from_slice(&[0xff, 0xff]);
            let m = format_msg(upgrade_v1(ctx, &bad));
            assert!(!m.contains("checksum"), "{name}: {m}");
        }
        // Version-1 objects are refused by the other word size and other parameters.
        assert!(upgrade_v1(fuzz_bodies::ctx32(), &old).is_err());
    }
    // The upgraded plaintext decodes to the values the fuzz seeds encode.
    let pt = Plaintext::from_bytes(ctx, &upgrade_v1(ctx, &v1("plaintext64.bin")).unwrap()).unwrap();
    let got = ctx.decode(&pt).unwrap();
    for (g, w) in got.iter().zip([0.5, -0.25, 0.125, 1.0]) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }
    // Upgraded evaluation keys carry their roles.
    let ek =
        EvaluationKeys::from_bytes(ctx, &upgrade_v1(ctx, &v1("evaluation_keys64.bin")).unwrap())
            .unwrap();
    assert_eq!(ek.relin_key().unwrap().role(), KeyRole::Relinearization);
    for g in ek.galois_elements() {
        assert_eq!(ek.galois_key(g).unwrap().role(), KeyRole::Galois(g));
    }
    // A 32-bit version-1 ciphertext upgrades with the 32-bit context.
    let c32 = v1("ciphertext32.bin");
    let new = upgrade_v1(fuzz_bodies::ctx32(), &c32).unwrap();
    Ciphertext::from_bytes(fuzz_bodies::ctx32(), &new).unwrap();
}

fn fuzz_name(kind: ObjectKind) -> &'static str {
    fuzz_bodies::TARGETS[usize::from(kind_index(kind))]
}

/// Random corruptions of the larger objects of the test setups (N = 2^13, both word sizes):
/// bit flips, byte overwrites, truncations, extensions and splices of two valid objects of
/// the same kind. Each is refused with a typed error or loads as one of the two originals.
fn large_corruptions<W: Word>(s: &Setup<W>) {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(W::BITS));
    let x = rand_vec(13, 64);
    let y = rand_vec(14, 64);
    let other = keygen(&s.ctx, &STEPS, true).unwrap();
    type Load<'a> = Box<dyn Fn(&[u8]) -> Result<Vec<u8>> + 'a>;
    let kinds: Vec<(&str, [Vec<u8>; 2], Load<'_>)> = vec![
        (
            "ciphertext",
            [
                s.enc.encrypt(&x, &s.keys.public_key).unwrap().to_bytes(),
                s.enc.encrypt(&y, &s.keys.public_key).unwrap().to_bytes(),
            ],
            Box::new(|b| Ciphertext::from_bytes(&s.ctx, b).map(|c| c.to_bytes())),
        ),
        (
            "public key",
            [s.keys.public_key.to_bytes(), other.public_key.to_bytes()],
            Box::new(|b| PublicKey::from_bytes(&s.ctx, b).map(|c| c.to_bytes())),
        ),
        (
            "evaluation keys",
            [
                s.keys.evaluation_keys.to_bytes(),
                other.evaluation_keys.to_bytes(),
            ],
            Box::new(|b| EvaluationKeys::from_bytes(&s.ctx, b).map(|c| c.to_bytes())),
        ),
        (
            "secret key",
            [s.keys.secret_key.to_bytes(), other.secret_key.to_bytes()],
            Box::new(|b| SecretKey::from_bytes(&s.ctx, b).map(|c| c.to_bytes())),
        ),
    ];
    for (name, [a, b], load) in &kinds {
        for trial in 0..250 {
            let mut c = a.clone();
            let i = rng.gen_range(0..c.len());
            match trial % 5 {
                0 => c[i] ^= 1 << rng.gen_range(0..8),
                1 => c[i] = c[i].wrapping_add(rng.gen_range(1..=255)),
                2 => c.truncate(i),
                3 => {
                    let extra: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
                    c.splice(i..i, extra);
                }
                _ => {
                    let j = rng.gen_range(0..b.len());
                    c = [&a[..i], &b[j..]].concat();
                }
            }
            match load(&c) {
                Ok(got) => assert!(
                    got == *a || got == *b,
                    "{name}: corruption {trial} loaded as a third object"
                ),
                Err(CkksError::Format(_)) | Err(CkksError::ParameterMismatch(_)) => {}
                Err(e) => panic!("{name}: unexpected error kind {e:?}"),
            }
        }
    }
}
both!(random_corruptions_of_large_objects, large_corruptions);
