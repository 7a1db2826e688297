//! `soft`: constant-time software AES without AES instructions — a genuinely different, slower engine, so that
//! every machine has two real heterogeneous devices.
//!
//! The block cipher is RustCrypto's fixsliced AES (Adomnicai and Peyrin, TCHES 2021) forced to its software
//! backend: no table look-ups, no secret-dependent branches. GCM uses the same cipher with software GHASH.
//! CBC is written out here (chaining and PKCS#7 only); decryption batches blocks so the fixslice runs 4 at once.

// generic-array 0.14, which the 0.7 cipher traits take, marks itself deprecated in favour of 1.x; the types are
// what this cipher line's API requires.
#![allow(deprecated)]

use aes_gcm_soft::aead::{AeadInPlace, NewAead};
use aes_gcm_soft::{Aes256Gcm, Nonce, Tag};
use aes_soft::cipher::consts::U16;
use aes_soft::cipher::generic_array::GenericArray;
use aes_soft::cipher::{BlockCipher, BlockDecrypt, BlockEncrypt, NewBlockCipher};
use aes_soft::{Aes128, Aes192, Aes256, Block};

use super::{pkcs7_pad, pkcs7_unpad, Cipher, BLOCK, NONCE, TAG};
use crate::device::{DeviceInfo, DeviceKind};
use crate::error::{DeviceError, Result};

enum Keys {
    A128(Box<Aes128>),
    A192(Box<Aes192>),
    A256(Box<Aes256>),
    Gcm(Box<Aes256Gcm>),
}

/// A keyed constant-time software AES engine.
pub struct SoftEngine {
    keys: Keys,
}

/// Blocks decrypted per batch in CBC decryption.
const BATCH: usize = 64;

impl SoftEngine {
    /// Expands `key` for `cipher`.
    pub fn new(cipher: Cipher, key: &[u8]) -> Result<Self> {
        if key.len() != cipher.key_len() {
            return Err(DeviceError::InvalidParameter(format!(
                "{} needs a {}-byte key",
                cipher.name(),
                cipher.key_len()
            )));
        }
        let keys = match cipher {
            Cipher::Aes128Cbc => Keys::A128(Box::new(Aes128::new(GenericArray::from_slice(key)))),
            Cipher::Aes192Cbc => Keys::A192(Box::new(Aes192::new(GenericArray::from_slice(key)))),
            Cipher::Aes256Cbc => Keys::A256(Box::new(Aes256::new(GenericArray::from_slice(key)))),
            Cipher::Aes256Gcm => Keys::Gcm(Box::new(Aes256Gcm::new(GenericArray::from_slice(key)))),
        };
        Ok(SoftEngine { keys })
    }

    /// Encrypts one item (same format as [`super::cpu::CpuEngine::encrypt`]).
    pub fn encrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(input.len() + BLOCK);
        out.extend_from_slice(input);
        match &self.keys {
            Keys::A128(c) => cbc_encrypt(c.as_ref(), iv, &mut out),
            Keys::A192(c) => cbc_encrypt(c.as_ref(), iv, &mut out),
            Keys::A256(c) => cbc_encrypt(c.as_ref(), iv, &mut out),
            Keys::Gcm(g) => {
                let tag = g
                    .encrypt_in_place_detached(Nonce::from_slice(&iv[..NONCE]), b"", &mut out)
                    .map_err(|_| "AES-GCM encryption failed".to_string())?;
                out.extend_from_slice(&tag);
            }
        }
        Ok(out)
    }

    /// Decrypts one item, checking padding or tag.
    pub fn decrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String> {
        match &self.keys {
            Keys::Gcm(g) => {
                if input.len() < TAG {
                    return Err(format!(
                        "GCM ciphertext of {} bytes is shorter than its tag",
                        input.len()
                    ));
                }
                let (ct, tag) = input.split_at(input.len() - TAG);
                let mut out = ct.to_vec();
                g.decrypt_in_place_detached(
                    Nonce::from_slice(&iv[..NONCE]),
                    b"",
                    &mut out,
                    Tag::from_slice(tag),
                )
                .map_err(|_| {
                    "GCM tag mismatch (wrong key or nonce, or corrupted ciphertext)".to_string()
                })?;
                Ok(out)
            }
            keys => {
                if input.is_empty() || !input.len().is_multiple_of(BLOCK) {
                    return Err(format!(
                        "CBC ciphertext of {} bytes is not a positive multiple of 16",
                        input.len()
                    ));
                }
                let mut out = input.to_vec();
                match keys {
                    Keys::A128(c) => cbc_decrypt(c.as_ref(), iv, &mut out),
                    Keys::A192(c) => cbc_decrypt(c.as_ref(), iv, &mut out),
                    Keys::A256(c) => cbc_decrypt(c.as_ref(), iv, &mut out),
                    Keys::Gcm(_) => unreachable!("handled above"),
                }
                pkcs7_unpad(&mut out)?;
                Ok(out)
            }
        }
    }
}

/// CBC encryption in place with PKCS#7 padding: C_i = E(P_i xor C_{i-1}), C_0 = IV (SP 800-38A 6.2).
fn cbc_encrypt<C: BlockEncrypt + BlockCipher<BlockSize = U16>>(
    c: &C,
    iv: &[u8; BLOCK],
    buf: &mut Vec<u8>,
) {
    pkcs7_pad(buf);
    let mut prev = Block::clone_from_slice(iv);
    for chunk in buf.chunks_exact_mut(BLOCK) {
        for (p, x) in prev.iter_mut().zip(chunk.iter()) {
            *p ^= *x;
        }
        c.encrypt_block(&mut prev);
        chunk.copy_from_slice(&prev);
    }
}

/// CBC decryption in place: P_i = D(C_i) xor C_{i-1}, decrypting up to [`BATCH`] blocks at once.
fn cbc_decrypt<C: BlockDecrypt + BlockCipher<BlockSize = U16>>(
    c: &C,
    iv: &[u8; BLOCK],
    buf: &mut [u8],
) {
    let mut prev = *iv;
    let mut blocks = [Block::default(); BATCH];
    for chunk in buf.chunks_mut(BLOCK * BATCH) {
        let n = chunk.len() / BLOCK;
        for (b, src) in blocks.iter_mut().zip(chunk.chunks_exact(BLOCK)) {
            b.copy_from_slice(src);
        }
        c.decrypt_blocks(&mut blocks[..n]);
        for (b, dst) in blocks[..n].iter().zip(chunk.chunks_exact_mut(BLOCK)) {
            let mut next = [0u8; BLOCK];
            next.copy_from_slice(dst);
            for ((d, x), p) in dst.iter_mut().zip(b.iter()).zip(prev.iter()) {
                *d = x ^ p;
            }
            prev = next;
        }
    }
}

/// Constant-time software AES on `threads` CPU threads.
pub struct SoftDevice {
    info: DeviceInfo,
}

impl SoftDevice {
    /// A `soft` device with `threads` workers.
    pub fn new(threads: usize) -> Result<Self> {
        let engine = || "RustCrypto fixsliced AES (constant time, no AES-NI)".into();
        Ok(SoftDevice {
            info: DeviceInfo::on_threads(DeviceKind::Soft, threads, threads, engine)?,
        })
    }

    /// Renames the device (to tell two devices of one kind apart in a run).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }
}

engine_device!(SoftEngine, SoftDevice);
