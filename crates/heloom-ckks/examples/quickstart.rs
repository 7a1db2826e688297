//! heloom in Rust, end to end: parameters, keys, encryption, arithmetic, a rotation, a
//! polynomial (circuits layer), serialization with its checks, decryption.
//!
//! ```text
//! cargo run --release -p heloom-ckks --example quickstart
//! ```

use heloom_ckks::serialize::peek_header;
use heloom_ckks::*;
use std::sync::Arc;

fn main() -> Result<()> {
    // 128-bit secure parameters (HE standard table): N = 2^14, 6 levels of 40-bit scale.
    let params = CkksParameters::builder(1 << 14)
        .levels(6)
        .scale_bits(40)
        .build()?;
    println!("{params}");
    // The SIMD backend is the context's choice: the fastest this CPU runs (or Context::with_backend).
    let ctx = Context::<u64>::new(params)?;
    println!("backend: {}", ctx.backend());

    // Client: keys (Galois keys for a rotation by 1), encryption.
    let keys = keygen(&ctx, &[1], true)?;
    let x: Vec<f64> = (0..8).map(|i| i as f64 / 8.0).collect();
    let ct = Encryptor::new(&ctx).encrypt(&x, &keys.public_key)?;

    // What travels to the server: the ciphertext and the evaluation keys, checksummed and
    // fingerprinted (the secret key stays here).
    let wire = ct.to_bytes();
    let keys_wire = keys.evaluation_keys.to_bytes();
    println!(
        "ciphertext: {} bytes, {:?}",
        wire.len(),
        peek_header(&wire)?.kind
    );

    // Server: x * x + x, rotated left by one slot, then e^x ~ 1 + x + x^2/2 + x^3/6.
    let ev = Evaluator::new(
        &ctx,
        Arc::new(EvaluationKeys::from_bytes(&ctx, &keys_wire)?),
    )?;
    let ct = Ciphertext::from_bytes(&ctx, &wire)?;
    let sq = ev.multiply_relin_rescale(&ct, &ct)?;
    let sum = ev.add(&sq, &ct)?; // levels and scales aligned automatically
    let rotated = ev.rotate(&sum, 1)?;
    let exp = ev.evaluate_polynomial(&ct, &[1.0, 1.0, 0.5, 1.0 / 6.0], PolyBasis::Power)?;

    // Client: decrypt and compare.
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let got = dec.decrypt(&rotated)?;
    let got_exp = dec.decrypt(&exp)?;
    println!("  i      x   rot(x^2 + x)   expected   taylor e^x   expected");
    for i in 0..7 {
        let want = x[i + 1] * x[i + 1] + x[i + 1];
        let xi = x[i];
        let taylor = 1.0 + xi + xi * xi / 2.0 + xi * xi * xi / 6.0;
        println!(
            "  {i}  {xi:5.3}   {:12.8}   {want:8.6}   {:10.8}   {taylor:8.6}",
            got[i], got_exp[i]
        );
        if (got[i] - want).abs() > 1e-6 || (got_exp[i] - taylor).abs() > 1e-6 {
            return Err(CkksError::InvalidInput(format!(
                "slot {i} is off by more than 1e-6"
            )));
        }
    }
    println!("every slot within 1e-6 of the plaintext result");
    Ok(())
}
