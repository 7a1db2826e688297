//! Shared bodies of the fuzz targets in `fuzz_targets/`: each feeds the input to one
//! `from_bytes` loader of heloom-ckks' binary format, for both word sizes, on small fixed
//! contexts (N = 2^10, no security bound, built once). A loaded object must serialize again,
//! reload, and serialize to the same bytes; anything else (a panic, a failed reload) is a bug.
//!
//! heloom-ckks' own test suite (`tests/serialize.rs`) compiles this file too and runs every body
//! on valid and mutated inputs, so it is checked on stable Rust without cargo-fuzz.

#[cfg(not(test))]
pub mod graph;
#[cfg(not(test))]
pub use graph::task_graph;
#[cfg(not(test))]
pub mod serve;
#[cfg(not(test))]
pub use serve::serve_request;

use heloom_ckks::serialize::peek_kind;
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Encryptor, EvaluationKeys, Evaluator, Plaintext,
    PublicKey, Result, SecretKey, SecurityLevel, SwitchingKey,
};
use heloom_math::Word;
use std::sync::{Arc, OnceLock};

/// The small parameter set of the fuzz contexts for a word size (32 or 64).
pub fn small_params(word_bits: u32) -> CkksParameters {
    let scale_bits = if word_bits == 32 { 25 } else { 40 };
    CkksParameters::builder(1 << 10)
        .word_bits(word_bits)
        .levels(1)
        .scale_bits(scale_bits)
        .security(SecurityLevel::None)
        .build()
        .expect("the fuzz parameters are valid")
}

/// The 32-bit fuzz context (built on first use).
pub fn ctx32() -> &'static Arc<Context<u32>> {
    static CTX: OnceLock<Arc<Context<u32>>> = OnceLock::new();
    CTX.get_or_init(|| Context::new(small_params(32)).expect("the 32-bit fuzz context builds"))
}

/// The 64-bit fuzz context (built on first use).
pub fn ctx64() -> &'static Arc<Context<u64>> {
    static CTX: OnceLock<Arc<Context<u64>>> = OnceLock::new();
    CTX.get_or_init(|| Context::new(small_params(64)).expect("the 64-bit fuzz context builds"))
}

/// `data` with its last 8 bytes replaced by the XXH3-64 checksum of the rest: what a valid
/// object's trailer holds. The fuzzer cannot find a 64-bit hash by itself, so every body
/// runs on the input as given (the header and checksum checks) and resealed (every check
/// behind them).
pub fn resealed(data: &[u8]) -> Vec<u8> {
    let mut b = data.to_vec();
    if b.len() >= 8 {
        let end = b.len() - 8;
        let sum = xxhash_rust::xxh3::xxh3_64(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
    }
    b
}

/// Loads `data` as given and resealed; when that succeeds, checks that the object
/// round-trips canonically.
fn check<T>(data: &[u8], load: impl Fn(&[u8]) -> Result<T>, save: impl Fn(&T) -> Vec<u8>) {
    check_one(data, &load, &save);
    check_one(&resealed(data), &load, &save);
}

fn check_one<T>(data: &[u8], load: &impl Fn(&[u8]) -> Result<T>, save: &impl Fn(&T) -> Vec<u8>) {
    if let Ok(x) = load(data) {
        let once = save(&x);
        let y = match load(&once) {
            Ok(y) => y,
            Err(e) => panic!("a loaded object failed to reload after to_bytes: {e}"),
        };
        assert!(
            save(&y) == once,
            "to_bytes is not stable after a round trip"
        );
    }
}

/// Fuzz body of `CkksParameters::from_bytes`.
pub fn params(data: &[u8]) {
    let _ = peek_kind(data);
    check(data, CkksParameters::from_bytes, CkksParameters::to_bytes);
}

/// Runs `body` for both word sizes.
fn both(data: &[u8], body: impl Fn(&[u8], &Context<u32>, &Context<u64>)) {
    let _ = peek_kind(data);
    body(data, ctx32(), ctx64());
}

macro_rules! body {
    ($(#[$doc:meta])* $name:ident, $ty:ident) => {
        $(#[$doc])*
        pub fn $name(data: &[u8]) {
            both(data, |d, c32, c64| {
                check(d, |b| $ty::<u32>::from_bytes(c32, b), $ty::to_bytes);
                check(d, |b| $ty::<u64>::from_bytes(c64, b), $ty::to_bytes);
            });
        }
    };
}

body!(
    /// Fuzz body of `Ciphertext::from_bytes` (both word sizes).
    ciphertext,
    Ciphertext
);
body!(
    /// Fuzz body of `Plaintext::from_bytes` (both word sizes).
    plaintext,
    Plaintext
);
body!(
    /// Fuzz body of `PublicKey::from_bytes` (both word sizes).
    public_key,
    PublicKey
);
body!(
    /// Fuzz body of `SwitchingKey::from_bytes` (both word sizes).
    switching_key,
    SwitchingKey
);
body!(
    /// Fuzz body of `EvaluationKeys::from_bytes` (both word sizes).
    evaluation_keys,
    EvaluationKeys
);
body!(
    /// Fuzz body of `SecretKey::from_bytes` (both word sizes).
    secret_key,
    SecretKey
);

/// Valid objects of one word size, by target name.
fn seeds_for<W: Word>(ctx: &Arc<Context<W>>, out: &mut Vec<(&'static str, Vec<u8>)>) {
    let keys = keygen(ctx, &[1], true).expect("fuzz keygen");
    let enc = Encryptor::new(ctx);
    let values = [0.5, -0.25, 0.125, 1.0];
    let ct = enc
        .encrypt(&values, &keys.public_key)
        .expect("fuzz encryption");
    let sym = enc
        .encrypt_symmetric(&values, &keys.secret_key)
        .expect("fuzz symmetric encryption");
    let ev = Evaluator::without_keys(ctx);
    let ct3 = ev.multiply(&ct, &ct).expect("fuzz multiply");
    let pt = ctx.encode(&values).expect("fuzz encode");
    out.push(("params", ctx.params().to_bytes()));
    out.push(("ciphertext", ct.to_bytes()));
    out.push(("ciphertext", sym.to_bytes()));
    out.push(("ciphertext", ct3.to_bytes()));
    out.push(("plaintext", pt.to_bytes()));
    out.push(("public_key", keys.public_key.to_bytes()));
    let relin = keys
        .evaluation_keys
        .relin_key()
        .expect("fuzz relinearization key");
    out.push(("switching_key", relin.to_bytes()));
    out.push(("evaluation_keys", keys.evaluation_keys.to_bytes()));
    out.push(("evaluation_keys", EvaluationKeys::empty(ctx).to_bytes()));
    out.push(("secret_key", keys.secret_key.to_bytes()));
}

/// A seed corpus: valid objects of both word sizes for every target, as
/// `(target name, bytes)`. heloom-ckks' test `write_fuzz_corpus` writes them to
/// `fuzz/corpus/<target>/` when `HELOOM_FUZZ_CORPUS=1` is set.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    seeds_for(ctx32(), &mut out);
    seeds_for(ctx64(), &mut out);
    out
}

/// The fuzz body for a target name (`None` for an unknown name).
pub fn body_by_name(name: &str) -> Option<fn(&[u8])> {
    Some(match name {
        "params" => params,
        "ciphertext" => ciphertext,
        "plaintext" => plaintext,
        "public_key" => public_key,
        "switching_key" => switching_key,
        "evaluation_keys" => evaluation_keys,
        "secret_key" => secret_key,
        _ => return None,
    })
}

/// Names of the fuzz targets, in the order of the object kinds' codes.
pub const TARGETS: [&str; 7] = [
    "params",
    "ciphertext",
    "plaintext",
    "public_key",
    "switching_key",
    "evaluation_keys",
    "secret_key",
];
