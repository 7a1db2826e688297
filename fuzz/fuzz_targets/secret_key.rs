//! Fuzzes the `secret_key` loader of heloom-ckks' binary format: `cargo +nightly fuzz run secret_key`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::secret_key(data));
