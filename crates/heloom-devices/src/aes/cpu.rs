//! `cpu`: AES on CPU cores with AES-NI and, for the parallel modes, VAES (AVX-512), through AWS-LC's assembly.
//!
//! AWS-LC picks its kernels at run time from CPUID, so one binary runs everywhere; without AES-NI it falls back to
//! its constant-time bit-sliced code, which this device reports in its engine string.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128,
    AES_192, AES_256,
};
use aws_lc_rs::iv::FixedLength;

use super::{pkcs7_pad, pkcs7_unpad, Cipher, BLOCK, NONCE};
use crate::device::{DeviceInfo, DeviceKind};
use crate::error::{DeviceError, Result};

enum Keys {
    Cbc {
        enc: Box<EncryptingKey>,
        dec: Box<DecryptingKey>,
    },
    Gcm(LessSafeKey),
}

/// A keyed AES engine on AWS-LC; also the reference every device is checked against.
pub struct CpuEngine {
    keys: Keys,
}

impl CpuEngine {
    /// Expands `key` for `cipher`.
    pub fn new(cipher: Cipher, key: &[u8]) -> Result<Self> {
        let bad = || {
            DeviceError::InvalidParameter(format!(
                "{} needs a {}-byte key",
                cipher.name(),
                cipher.key_len()
            ))
        };
        if key.len() != cipher.key_len() {
            return Err(bad());
        }
        let keys = match cipher {
            Cipher::Aes256Gcm => Keys::Gcm(LessSafeKey::new(
                UnboundKey::new(&AES_256_GCM, key).map_err(|_| bad())?,
            )),
            _ => {
                let alg = match cipher {
                    Cipher::Aes128Cbc => &AES_128,
                    Cipher::Aes192Cbc => &AES_192,
                    _ => &AES_256,
                };
                let enc = EncryptingKey::cbc(UnboundCipherKey::new(alg, key).map_err(|_| bad())?)
                    .map_err(|_| bad())?;
                let dec = DecryptingKey::cbc(UnboundCipherKey::new(alg, key).map_err(|_| bad())?)
                    .map_err(|_| bad())?;
                Keys::Cbc {
                    enc: Box::new(enc),
                    dec: Box::new(dec),
                }
            }
        };
        Ok(CpuEngine { keys })
    }

    /// Encrypts one item: CBC with PKCS#7 padding, or GCM with the tag appended.
    pub fn encrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(input.len() + BLOCK);
        out.extend_from_slice(input);
        match &self.keys {
            Keys::Cbc { enc, .. } => {
                pkcs7_pad(&mut out);
                enc.less_safe_encrypt(&mut out, EncryptionContext::Iv128(FixedLength::from(*iv)))
                    .map_err(|_| "AES-CBC encryption failed".to_string())?;
            }
            Keys::Gcm(key) => {
                let nonce = Nonce::try_assume_unique_for_key(&iv[..NONCE])
                    .map_err(|_| "bad GCM nonce".to_string())?;
                let tag = key
                    .seal_in_place_separate_tag(nonce, Aad::empty(), &mut out)
                    .map_err(|_| "AES-GCM encryption failed".to_string())?;
                out.extend_from_slice(tag.as_ref());
            }
        }
        Ok(out)
    }

    /// Decrypts one item, checking the padding (CBC) or the tag (GCM).
    pub fn decrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let mut out = input.to_vec();
        match &self.keys {
            Keys::Cbc { dec, .. } => {
                if out.is_empty() || !out.len().is_multiple_of(BLOCK) {
                    return Err(format!(
                        "CBC ciphertext of {} bytes is not a positive multiple of 16",
                        out.len()
                    ));
                }
                dec.decrypt(&mut out, DecryptionContext::Iv128(FixedLength::from(*iv)))
                    .map_err(|_| "AES-CBC decryption failed".to_string())?;
                pkcs7_unpad(&mut out)?;
            }
            Keys::Gcm(key) => {
                let nonce = Nonce::try_assume_unique_for_key(&iv[..NONCE])
                    .map_err(|_| "bad GCM nonce".to_string())?;
                let n = key
                    .open_in_place(nonce, Aad::empty(), &mut out)
                    .map_err(|_| {
                        "GCM tag mismatch (wrong key or nonce, or corrupted ciphertext)".to_string()
                    })?
                    .len();
                out.truncate(n);
            }
        }
        Ok(out)
    }
}

/// AES-NI / VAES on `threads` CPU threads.
pub struct CpuDevice {
    info: DeviceInfo,
}

impl CpuDevice {
    /// A `cpu` device with `threads` workers.
    pub fn new(threads: usize) -> Result<Self> {
        let engine = || format!("AWS-LC {}", hardware_name());
        Ok(CpuDevice {
            info: DeviceInfo::on_threads(DeviceKind::Cpu, threads, threads, engine)?,
        })
    }

    /// Renames the device (to tell two devices of one kind apart in a run).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }
}

/// The AES instructions AWS-LC will find on this CPU.
pub fn hardware_name() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        let aes = std::arch::is_x86_feature_detected!("aes");
        let vaes = std::arch::is_x86_feature_detected!("vaes")
            && std::arch::is_x86_feature_detected!("avx512f");
        match (aes, vaes) {
            (true, true) => "AES-NI + VAES/AVX-512",
            (true, false) => "AES-NI",
            _ => "constant-time fallback (no AES-NI)",
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        "ARMv8 AES"
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        "portable"
    }
}

engine_device!(CpuEngine, CpuDevice);
