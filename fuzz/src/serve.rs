//! Fuzz body of heloom serve's request decoding: the job description (`POST /v1/jobs` JSON,
//! and the same bytes as a `POST /v1/jobs/batch` body),
//! key-set uploads (parameters followed by evaluation keys) and result or ciphertext
//! sequences, as the server parses them from the network. heloom-serve's test
//! `tests/fuzz_bodies.rs` compiles this file and runs the body on valid and mutated inputs
//! and on the committed corpus (`corpus/serve_request/`).
//!
//! The first byte picks the decoder (0: job JSON, 1: key set, 2: ciphertexts); the rest is
//! its input. Every decoder must return an error or a valid value, never panic; a decoded key
//! set must serialize and decode to the same bytes again.

use heloom_ckks::serialize::HEADER_LEN;
use heloom_ckks::{CkksParameters, Context, SecurityLevel};
use heloom_serve::objects::{object_len, parse_ciphertexts, parse_keys, Contexts};
use std::sync::{Arc, OnceLock};

/// Each object in `data` (as far as its headers frame them) with its last 8 bytes replaced
/// by the XXH3-64 of the rest, so that mutations get past the checksums.
fn resealed(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while !rest.is_empty() {
        let n = object_len(rest).unwrap_or(rest.len());
        let mut b = rest[..n].to_vec();
        if b.len() >= HEADER_LEN + 8 {
            let end = b.len() - 8;
            let sum = xxhash_rust::xxh3::xxh3_64(&b[..end]);
            b[end..].copy_from_slice(&sum.to_le_bytes());
        }
        out.extend_from_slice(&b);
        rest = &rest[n..];
    }
    out
}

/// The small context ciphertext inputs are decoded for (N = 2^10, insecure: a fuzz fixture).
pub fn fuzz_params() -> CkksParameters {
    CkksParameters::builder(1 << 10)
        .levels(2)
        .scale_bits(30)
        .security(SecurityLevel::None)
        .build()
        .expect("the fuzz parameters are valid")
}

fn context() -> &'static Arc<Context<u64>> {
    static CTX: OnceLock<Arc<Context<u64>>> = OnceLock::new();
    CTX.get_or_init(|| Context::<u64>::new(fuzz_params()).expect("the fuzz context"))
}

fn contexts() -> &'static Contexts {
    static C: OnceLock<Contexts> = OnceLock::new();
    C.get_or_init(Contexts::default)
}

/// Runs one fuzz input.
pub fn serve_request(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            let _ = heloom_serve::api::decode_submit(rest);
            let _ = heloom_serve::api::decode_batch(rest);
        }
        1 => {
            for d in [rest.to_vec(), resealed(rest)] {
                // Larger rings than the fixture would only slow the fuzzer down.
                if d.len() > 4 << 20 {
                    continue;
                }
                if let Ok(ks) = parse_keys(&d, contexts(), true) {
                    let mut once = ks.ctx.params().to_bytes();
                    once.extend_from_slice(&ks.keys.to_bytes());
                    let again = match parse_keys(&once, contexts(), true) {
                        Ok(k) => {
                            let mut b = k.ctx.params().to_bytes();
                            b.extend_from_slice(&k.keys.to_bytes());
                            b
                        }
                        Err(e) => panic!("a decoded key set failed to decode again: {e}"),
                    };
                    assert!(
                        once == again,
                        "key set bytes are not stable after a round trip"
                    );
                }
            }
        }
        _ => {
            for d in [rest.to_vec(), resealed(rest)] {
                if let Ok(cts) = parse_ciphertexts(&d, context()) {
                    for c in &cts {
                        let b = c.to_bytes();
                        assert!(
                            parse_ciphertexts(&b, context()).is_ok(),
                            "a decoded ciphertext failed to decode again"
                        );
                    }
                }
            }
        }
    }
}
