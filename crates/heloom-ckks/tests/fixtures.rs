//! Frozen format-version-2 objects (`tests/data/v2`, the fuzz parameters: N = 2^10, one level,
//! both word sizes): each must load and write back byte for byte, and decrypt and compute to
//! the values it was made from. A change to the format, the fingerprints or the checksum that
//! would strand users' stored objects fails here first; a deliberate one regenerates the files
//! (`HELOOM_WRITE_FIXTURES=1 cargo test -p heloom-ckks --test fixtures`) and says so.
//!
//! Bound: the values are in [-1, 1]; a fresh ciphertext decrypts within 2^-20 (64-bit words,
//! scale 2^40) or 2^-10 (32-bit words, scale 2^25), a square after relinearization and
//! rescaling within 2^-18, a rotation within 2^-18.

#![allow(clippy::unwrap_used)]

// Only the fuzz contexts are used here.
mod common;
#[allow(dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_bodies;

use common::max_err;
use heloom_ckks::serialize::{peek_header, ObjectKind};
use heloom_ckks::*;
use std::path::PathBuf;

const VALUES: [f64; 8] = [0.5, -0.25, 0.125, 1.0, -1.0, 0.75, -0.5, 0.0625];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v2")
}

fn read(name: &str) -> Vec<u8> {
    let path = dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with HELOOM_WRITE_FIXTURES=1 only for a deliberate format change)",
            path.display()
        )
    })
}

/// Loads the fixture `$name` as a `$ty` for `$ctx` and checks that it writes back byte for byte.
macro_rules! reload {
    ($ty:ident, $ctx:expr, $name:literal) => {{
        let bytes = read($name);
        let obj = $ty::from_bytes($ctx, &bytes).unwrap();
        assert_eq!(obj.to_bytes(), bytes, $name);
        obj
    }};
}

/// Writes the fixtures when `HELOOM_WRITE_FIXTURES=1`; otherwise does nothing.
#[test]
fn write_v2_fixtures() {
    if std::env::var("HELOOM_WRITE_FIXTURES").as_deref() != Ok("1") {
        return;
    }
    std::fs::create_dir_all(dir()).unwrap();
    let write = |name: &str, b: Vec<u8>| std::fs::write(dir().join(name), b).unwrap();
    let ctx = fuzz_bodies::ctx64();
    let keys = keygen(ctx, &[1], true).unwrap();
    let enc = Encryptor::new(ctx);
    write("params64.bin", ctx.params().to_bytes());
    write("secret_key64.bin", keys.secret_key.to_bytes());
    write("public_key64.bin", keys.public_key.to_bytes());
    write("evaluation_keys64.bin", keys.evaluation_keys.to_bytes());
    write(
        "switching_key64.bin",
        keys.evaluation_keys.relin_key().unwrap().to_bytes(),
    );
    write(
        "ciphertext64.bin",
        enc.encrypt(&VALUES, &keys.public_key).unwrap().to_bytes(),
    );
    write(
        "ciphertext64-seeded.bin",
        enc.encrypt_symmetric(&VALUES, &keys.secret_key)
            .unwrap()
            .to_bytes(),
    );
    write("plaintext64.bin", ctx.encode(&VALUES).unwrap().to_bytes());
    let ctx32 = fuzz_bodies::ctx32();
    let keys32 = keygen(ctx32, &[], false).unwrap();
    write("params32.bin", ctx32.params().to_bytes());
    write("secret_key32.bin", keys32.secret_key.to_bytes());
    write(
        "ciphertext32.bin",
        Encryptor::new(ctx32)
            .encrypt(&VALUES, &keys32.public_key)
            .unwrap()
            .to_bytes(),
    );
}

#[test]
fn frozen_v2_objects_load_write_back_and_compute() {
    let ctx = fuzz_bodies::ctx64();
    // Headers: version 2, the kind each file claims.
    for (name, kind) in [
        ("params64.bin", ObjectKind::Parameters),
        ("secret_key64.bin", ObjectKind::SecretKey),
        ("public_key64.bin", ObjectKind::PublicKey),
        ("evaluation_keys64.bin", ObjectKind::EvaluationKeys),
        ("switching_key64.bin", ObjectKind::SwitchingKey),
        ("ciphertext64.bin", ObjectKind::Ciphertext),
        ("ciphertext64-seeded.bin", ObjectKind::Ciphertext),
        ("plaintext64.bin", ObjectKind::Plaintext),
        ("params32.bin", ObjectKind::Parameters),
        ("secret_key32.bin", ObjectKind::SecretKey),
        ("ciphertext32.bin", ObjectKind::Ciphertext),
    ] {
        let b = read(name);
        assert_eq!(
            (&b[..4], u16::from_le_bytes([b[4], b[5]])),
            (&b"HELM"[..], 2),
            "{name}"
        );
        assert_eq!(peek_header(&b).unwrap().kind, kind, "{name}");
    }

    // Byte-for-byte round trips.
    let params = read("params64.bin");
    assert_eq!(CkksParameters::from_bytes(&params).unwrap(), *ctx.params());
    assert_eq!(ctx.params().to_bytes(), params);
    let sk = reload!(SecretKey, ctx, "secret_key64.bin");
    let pk = reload!(PublicKey, ctx, "public_key64.bin");
    let ek = reload!(EvaluationKeys, ctx, "evaluation_keys64.bin");
    let swk = reload!(SwitchingKey, ctx, "switching_key64.bin");
    assert_eq!(swk.role(), KeyRole::Relinearization);
    let ct = reload!(Ciphertext, ctx, "ciphertext64.bin");
    let seeded = reload!(Ciphertext, ctx, "ciphertext64-seeded.bin");
    let pt = reload!(Plaintext, ctx, "plaintext64.bin");

    // The values they were made from.
    let n = VALUES.len();
    let bound = 1.0 / f64::from(1u32 << 20);
    let dec = Decryptor::new(ctx, &sk).unwrap();
    assert!(max_err(&dec.decrypt(&ct).unwrap()[..n], &VALUES) < bound);
    assert!(max_err(&dec.decrypt(&seeded).unwrap()[..n], &VALUES) < bound);
    assert!(max_err(&ctx.decode(&pt).unwrap()[..n], &VALUES) < bound);
    // A fresh encryption under the stored public key decrypts with the stored secret key.
    let fresh = Encryptor::new(ctx).encrypt(&VALUES, &pk).unwrap();
    assert!(max_err(&dec.decrypt(&fresh).unwrap()[..n], &VALUES) < bound);
    // The stored evaluation keys relinearize and rotate.
    let ev = Evaluator::new(ctx, std::sync::Arc::new(ek)).unwrap();
    let bound = 1.0 / f64::from(1u32 << 18);
    let sq = ev.multiply_relin_rescale(&ct, &ct).unwrap();
    let want: Vec<f64> = VALUES.iter().map(|x| x * x).collect();
    assert!(max_err(&dec.decrypt(&sq).unwrap()[..n], &want) < bound);
    let rot = ev.rotate(&ct, 1).unwrap();
    let got = dec.decrypt(&rot).unwrap();
    assert!(max_err(&got[..n - 1], &VALUES[1..]) < bound);

    // 32-bit words.
    let ctx32 = fuzz_bodies::ctx32();
    assert_eq!(ctx32.params().to_bytes(), read("params32.bin"));
    let sk32 = reload!(SecretKey, ctx32, "secret_key32.bin");
    let ct32 = reload!(Ciphertext, ctx32, "ciphertext32.bin");
    let got = Decryptor::new(ctx32, &sk32)
        .unwrap()
        .decrypt(&ct32)
        .unwrap();
    assert!(max_err(&got[..n], &VALUES) < 1.0 / 1024.0);
}
