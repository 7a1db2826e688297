//! Fuzzes the `plaintext` loader of heloom-ckks' binary format: `cargo +nightly fuzz run plaintext`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::plaintext(data));
