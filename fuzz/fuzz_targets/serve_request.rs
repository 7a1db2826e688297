//! Fuzzes heloom serve's request decoding (job JSON, key-set uploads, ciphertext sequences):
//! `cargo +nightly fuzz run serve_request`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::serve_request(data));
