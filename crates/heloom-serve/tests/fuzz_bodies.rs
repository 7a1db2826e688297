//! The request-decoding fuzz body (`fuzz/src/serve.rs`) on stable Rust: valid job
//! descriptions, key sets and ciphertexts, thousands of mutations of each (bit flips,
//! truncations, junk), and every committed corpus file must decode or fail cleanly, never
//! panic.

#[path = "../../../fuzz/src/serve.rs"]
mod body;

use heloom_ckks::{keygen, Context, Encryptor};

fn valid_inputs() -> Vec<Vec<u8>> {
    let ctx = Context::<u64>::new(body::fuzz_params()).expect("context");
    let keys = keygen(&ctx, &[1], false).expect("keys");
    let mut key_set = vec![1u8];
    key_set.extend_from_slice(&ctx.params().to_bytes());
    key_set.extend_from_slice(&keys.evaluation_keys.to_bytes());
    let ct = Encryptor::new(&ctx)
        .encrypt(&[0.25, -0.5], &keys.public_key)
        .expect("encrypt");
    let mut cts = vec![2u8];
    cts.extend_from_slice(&ct.to_bytes());
    cts.extend_from_slice(&ct.to_bytes());
    let mut out = vec![key_set, cts];
    for json in [
        r#"{"idempotency_key":"a","key_id":"k","inputs":["x"],"task":{"kind":"exp"}}"#,
        r#"{"idempotency_key":"b","key_id":"k","inputs":["x"],"task":{"kind":"polynomial","coefficients":[1,0.5]},"priority":3,"deadline_unix":99}"#,
        r#"{"idempotency_key":"c","key_id":"k","task":{"kind":"graph","graph_id":"g"}}"#,
        r#"{"idempotency_key":"d","key_id":"k","task":{"kind":"exp","variant":"bsgs"}}"#,
        r#"{"jobs":[{"idempotency_key":"e","key_id":"k","inputs":["x"],"task":{"kind":"exp"},"result_level":0},{"idempotency_key":"f","key_id":"k","task":{"kind":"matmul","matrix":[[1,2],[3,4]]}}]}"#,
    ] {
        let mut b = vec![0u8];
        b.extend_from_slice(json.as_bytes());
        out.push(b);
    }
    out
}

#[test]
fn valid_requests_decode() {
    for input in valid_inputs() {
        body::serve_request(&input);
    }
    let json = br#"{"idempotency_key":"a","key_id":"k","inputs":["x"],"task":{"kind":"exp"}}"#;
    let d = heloom_serve::api::decode_submit(json).expect("a valid job");
    assert_eq!(d.idempotency_key, "a");
    for bad in [
        &br#"{"idempotency_key":"a","key_id":"k","task":{"kind":"exp","variant":"x"}}"#[..],
        br#"{"idempotency_key":"a","key_id":"k","task":{"kind":"polynomial","coefficients":[]}}"#,
        br#"{"idempotency_key":"a","key_id":"k","task":{"kind":"sqrt"}}"#,
        br#"{"idempotency_key":"a","key_id":"k","task":{"kind":"exp"},"extra":1}"#,
        br#"{"idempotency_key":"a","key_id":"k","task":{"kind":"polynomial","coefficients":[1e999]}}"#,
        b"[]",
        b"",
    ] {
        assert!(heloom_serve::api::decode_submit(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    let batch = br#"{"jobs":[{"idempotency_key":"a","key_id":"k","task":{"kind":"exp"}},{"idempotency_key":"b","key_id":"k","task":{"kind":"exp"},"result_level":0}]}"#;
    let jobs = heloom_serve::api::decode_batch(batch).expect("a valid batch");
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].spec.result_level, Some(0));
    for (bad, says) in [
        (&br#"{"jobs":[]}"#[..], "send 1 to 1000"),
        (br#"{"jobs":[{"idempotency_key":"a","key_id":"k","task":{"kind":"exp"}},{"idempotency_key":"a","key_id":"k","task":{"kind":"exp","variant":"x"}}]}"#, "job 1: e^x variant"),
        (br#"{"jobs":[{"key_id":"k"}]}"#, "job 0: the job description is not valid"),
        (br#"{"jobs":[],"more":1}"#, "the batch is not valid"),
    ] {
        let e = heloom_serve::api::decode_batch(bad).expect_err("refused").to_string();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn mutated_requests_never_panic() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for input in valid_inputs() {
        for _ in 0..300 {
            let mut m = input.clone();
            match next() % 3 {
                0 => {
                    let i = 1 + (next() as usize) % (m.len() - 1);
                    m[i] ^= 1 << (next() % 8);
                }
                1 => m.truncate(1 + (next() as usize) % m.len()),
                _ => {
                    let i = 1 + (next() as usize) % (m.len() - 1);
                    m[i] = next() as u8;
                }
            }
            body::serve_request(&m);
        }
    }
}

#[test]
fn corpus_replays() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/serve_request");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        if let Ok(data) = std::fs::read(e.path()) {
            body::serve_request(&data);
        }
    }
}
