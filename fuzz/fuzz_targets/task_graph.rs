//! Fuzzes the `task_graph` loader of heloom-ckks' binary format: `cargo +nightly fuzz run task_graph`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| heloom_fuzz::task_graph(data));
