//! Raw AES throughput of the `cpu` engine measured the way `openssl speed -evp` measures OpenSSL, and a runner
//! for `openssl speed` itself, so the two can be put side by side on one machine and thread count.
//!
//! `openssl speed -evp` keeps one cipher context per thread and calls it again and again on a buffer of the
//! given size: CBC is one long stream of updates (the IV chains from call to call), GCM starts a fresh message
//! (new IV, tag) per call. [`heloom_speed`] does exactly that with the `cpu` engine: CBC through AWS-LC's
//! streaming EVP context, GCM one sealed message per call.

use std::process::Command;
use std::time::{Duration, Instant};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::cipher::{
    DecryptionContext, EncryptionContext, StreamingDecryptingKey, StreamingEncryptingKey,
    UnboundCipherKey, AES_128, AES_192, AES_256,
};
use aws_lc_rs::iv::FixedLength;
use rand::RngCore;
use serde::Serialize;

use crate::aes::{Cipher, Direction};
use crate::error::{DeviceError, Result};

/// The sizes `openssl speed` uses by default.
pub const OPENSSL_SIZES: [usize; 6] = [16, 64, 256, 1024, 8192, 16384];

/// One size of a side-by-side comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SpeedRow {
    /// Cipher name.
    pub cipher: String,
    /// "encrypt" or "decrypt".
    pub direction: String,
    /// Bytes per call.
    pub size: usize,
    /// Threads, each with its own context.
    pub threads: usize,
    /// heloom `cpu` engine, MB/s (10^6 bytes per second).
    pub heloom_mb_s: f64,
    /// `openssl speed -evp`, MB/s.
    pub openssl_mb_s: f64,
    /// heloom / OpenSSL.
    pub ratio: f64,
}

fn key_err(_: aws_lc_rs::error::Unspecified) -> DeviceError {
    DeviceError::InvalidParameter("AWS-LC refused the key".into())
}

fn crypt_err(_: aws_lc_rs::error::Unspecified) -> DeviceError {
    DeviceError::Crypto {
        device: "cpu".into(),
        item: 0,
        what: "AWS-LC cipher call failed".into(),
    }
}

/// Calls `step` (one call on `size` bytes) in batches of `batch` until `dur` has passed since
/// `start`; returns the bytes processed. The clock is read once a batch, so timing stays out of
/// the loop.
fn calls_for(
    start: Instant,
    dur: Duration,
    batch: usize,
    size: usize,
    mut step: impl FnMut() -> Result<()>,
) -> Result<u64> {
    let mut done = 0u64;
    while start.elapsed() < dur {
        for _ in 0..batch {
            step()?;
            done += size as u64;
        }
    }
    Ok(done)
}

/// One thread's loop: returns bytes processed in `dur`.
fn one_thread(cipher: Cipher, direction: Direction, size: usize, dur: Duration) -> Result<u64> {
    let mut key = vec![0u8; cipher.key_len()];
    let mut iv = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut key);
    rand::rngs::OsRng.fill_bytes(&mut iv);
    let mut buf = vec![0x5au8; size];
    let mut out = vec![0u8; size + 32];
    let start = Instant::now();
    let batch = (1 << 20) / size.max(16) + 1;
    let done = if cipher.is_gcm() {
        let k = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).map_err(key_err)?);
        let mut counter = 0u64;
        let mut tags = Vec::with_capacity(1);
        calls_for(start, dur, batch, size, || {
            counter += 1;
            let mut n = [0u8; 12];
            n[4..].copy_from_slice(&counter.to_be_bytes());
            let nonce = Nonce::assume_unique_for_key(n);
            match direction {
                Direction::Encrypt => {
                    let tag = k
                        .seal_in_place_separate_tag(nonce, Aad::empty(), &mut buf)
                        .map_err(crypt_err)?;
                    tags.clear();
                    tags.push(tag);
                }
                Direction::Decrypt => {
                    // Same work as a successful open: decrypt and compute the tag; the comparison fails
                    // because the buffer holds no real ciphertext, which costs nothing extra.
                    out[..size].copy_from_slice(&buf);
                    let _ = k.open_in_place(nonce, Aad::empty(), &mut out[..size]);
                }
            }
            Ok(())
        })?
    } else {
        let alg = match cipher {
            Cipher::Aes128Cbc => &AES_128,
            Cipher::Aes192Cbc => &AES_192,
            _ => &AES_256,
        };
        let key = UnboundCipherKey::new(alg, &key).map_err(key_err)?;
        let done = match direction {
            Direction::Encrypt => {
                let ctx = EncryptionContext::Iv128(FixedLength::from(iv));
                let mut s =
                    StreamingEncryptingKey::less_safe_cbc_pkcs7(key, ctx).map_err(crypt_err)?;
                calls_for(start, dur, batch, size, || {
                    s.less_safe_update(&buf, &mut out)
                        .map(drop)
                        .map_err(crypt_err)
                })?
            }
            Direction::Decrypt => {
                let ctx = DecryptionContext::Iv128(FixedLength::from(iv));
                let mut s = StreamingDecryptingKey::cbc_pkcs7(key, ctx).map_err(crypt_err)?;
                calls_for(start, dur, batch, size, || {
                    s.update(&buf, &mut out).map(drop).map_err(crypt_err)
                })?
            }
        };
        buf[0] ^= out[0];
        done
    };
    std::hint::black_box(&buf);
    Ok(done)
}

/// Throughput of the `cpu` engine in MB/s with `threads` threads for `seconds` seconds per size.
pub fn heloom_speed(
    cipher: Cipher,
    direction: Direction,
    size: usize,
    threads: usize,
    seconds: f64,
) -> Result<f64> {
    if size == 0 || threads == 0 || seconds <= 0.0 {
        return Err(DeviceError::InvalidParameter(
            "speed needs size, threads and seconds above zero".into(),
        ));
    }
    if !cipher.is_gcm() && !size.is_multiple_of(16) {
        return Err(DeviceError::InvalidParameter(format!(
            "CBC speed needs a multiple of 16 bytes, got {size}"
        )));
    }
    let dur = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let total: Result<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| s.spawn(move || one_thread(cipher, direction, size, dur)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(DeviceError::WorkerPanicked("cpu".into())))
            })
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    Ok(total?.iter().sum::<u64>() as f64 / secs / 1e6)
}

/// Runs `openssl speed -evp` and returns (size, MB/s) for its six default sizes.
pub fn openssl_speed(
    cipher: Cipher,
    direction: Direction,
    threads: usize,
    seconds: u32,
) -> Result<Vec<(usize, f64)>> {
    let mut cmd = Command::new("openssl");
    cmd.arg("speed")
        .arg("-mr")
        .arg("-seconds")
        .arg(seconds.max(1).to_string());
    if threads > 1 {
        cmd.arg("-multi").arg(threads.to_string());
    }
    if direction == Direction::Decrypt {
        cmd.arg("-decrypt");
    }
    cmd.arg("-evp").arg(cipher.name());
    let out = cmd.output().map_err(|e| DeviceError::Unavailable {
        device: "openssl".into(),
        reason: format!("could not run `openssl speed`: {e}"),
        hint: "install the openssl command (apt-get install openssl) to compare against it".into(),
    })?;
    if !out.status.success() {
        return Err(DeviceError::Unavailable {
            device: "openssl".into(),
            reason: format!(
                "`openssl speed` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            hint: "check that this OpenSSL knows the cipher".into(),
        });
    }
    parse_openssl_mr(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `openssl speed -mr` output: `+H:16:64:...` gives the sizes, `+F:n:name:b1:b2:...` bytes per second.
pub fn parse_openssl_mr(text: &str) -> Result<Vec<(usize, f64)>> {
    let mut sizes: Vec<usize> = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("+H:") {
            sizes = rest
                .split(':')
                .filter_map(|s| s.trim().parse().ok())
                .collect();
        } else if let Some(rest) = line.strip_prefix("+F:") {
            // +F:<index>:<name>:<rate>:<rate>...
            rates = rest
                .split(':')
                .skip(2)
                .filter_map(|s| s.trim().parse().ok())
                .collect();
        }
    }
    if sizes.is_empty() || rates.len() < sizes.len() {
        return Err(DeviceError::Unavailable {
            device: "openssl".into(),
            reason: "could not read the sizes and rates from `openssl speed -mr`".into(),
            hint: "the output format of this OpenSSL is not the one heloom knows".into(),
        });
    }
    Ok(sizes
        .into_iter()
        .zip(rates)
        .map(|(s, r)| (s, r / 1e6))
        .collect())
}

/// Side-by-side rows for one cipher and direction.
pub fn compare_openssl(
    cipher: Cipher,
    direction: Direction,
    threads: usize,
    seconds: u32,
) -> Result<Vec<SpeedRow>> {
    let ossl = openssl_speed(cipher, direction, threads, seconds)?;
    ossl.into_iter()
        .map(|(size, o)| {
            let h = heloom_speed(cipher, direction, size, threads, seconds as f64)?;
            Ok(SpeedRow {
                cipher: cipher.name().into(),
                direction: direction.name().into(),
                size,
                threads,
                heloom_mb_s: h,
                openssl_mb_s: o,
                ratio: h / o,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_machine_readable_output() {
        let text = "+DT:aes-128-cbc:3:16\n+R:1:aes-128-cbc:3.0\n+H:16:64:256:1024:8192:16384\n+F:22:aes-128-cbc:1137648860.00:1331933310.00:1406044420.00:1420043260.00:1427177470.00:1407598590.00\n";
        let r = parse_openssl_mr(text).unwrap_or_default();
        assert_eq!(r.len(), 6);
        assert_eq!(r[0].0, 16);
        assert!((r[0].1 - 1137.64886).abs() < 1e-6);
        assert_eq!(r[5].0, 16384);
        assert!(parse_openssl_mr("garbage").is_err());
    }
}
