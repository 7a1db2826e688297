//! `Encryptor::encrypt_zero_flooded`: an encryption of zero whose decryption carries the
//! requested flooding error, and refusals of errors that do not fit.

use heloom_ckks::*;

#[test]
fn flooded_zero_has_the_requested_error() {
    let params = CkksParameters::new(1 << 13, 1, 40, 64).expect("params");
    let ctx = Context::<u64>::new(params).expect("context");
    let keys = keygen(&ctx, &[], false).expect("keys");
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key).expect("decryptor");
    let scale = 2f64.powi(40);
    let bits = 24;
    let ct = enc
        .encrypt_zero_flooded(1, scale, 4096, bits, &keys.public_key)
        .expect("flooded zero");
    let v = dec.decrypt_complex(&ct).expect("decrypt");
    // Uniform in [-2^b, 2^b) per coefficient: each slot's real part has variance
    // N (2^b)^2 / 3 / 2 / scale^2 (half of the complex variance).
    let want = 2f64.powi(bits as i32) * ((1 << 13) as f64 / 6.0).sqrt() / scale;
    let got = (v.iter().map(|z| z.re * z.re).sum::<f64>() / v.len() as f64).sqrt();
    assert!(
        got > 0.8 * want && got < 1.2 * want,
        "std {got:e}, expected {want:e}"
    );
    // Adding it to a ciphertext keeps the message within the flooding error.
    let x = enc
        .encrypt(&[0.5, -0.25], &keys.public_key)
        .expect("encrypt");
    let ev = Evaluator::without_keys(&ctx);
    let y = ev.add(&x, &ct).expect("add");
    let out = dec.decrypt(&y).expect("decrypt");
    assert!((out[0] - 0.5).abs() < 10.0 * want && (out[1] + 0.25).abs() < 10.0 * want);
    // Too large for the modulus, or invalid arguments.
    assert!(enc
        .encrypt_zero_flooded(0, scale, 4096, 60, &keys.public_key)
        .is_err());
    assert!(enc
        .encrypt_zero_flooded(1, scale, 0, 10, &keys.public_key)
        .is_err());
    assert!(enc
        .encrypt_zero_flooded(5, scale, 4096, 10, &keys.public_key)
        .is_err());
}
