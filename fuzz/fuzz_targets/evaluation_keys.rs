//! Fuzzes the `evaluation_keys` loader of heloom-ckks' binary format: `cargo +nightly fuzz run evaluation_keys`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::evaluation_keys(data));
