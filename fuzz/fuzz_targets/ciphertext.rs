//! Fuzzes the `ciphertext` loader of heloom-ckks' binary format: `cargo +nightly fuzz run ciphertext`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::ciphertext(data));
