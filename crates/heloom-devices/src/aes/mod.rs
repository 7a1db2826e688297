//! AES work for the device layer: the paper's file-encryption workload (seed 001) and the engines that run it.
//!
//! Every item is one "file": its own IV (CBC) or nonce (GCM) under one key, PKCS#7 padding for CBC, a 16-byte tag
//! appended for GCM. Keys and IVs come from the operating system's CSPRNG; payloads from a seeded ChaCha20 so that
//! runs are repeatable. Each workload carries the expected output of every item, computed by the reference engine
//! before anything is timed, so every run of every balancer is checked byte for byte.

/// The [`Engine`] of an engine type from its inherent `new`, `encrypt` and `decrypt`, and the
/// AES [`Device`](crate::device::Device) of its device type (an `info` field) running that
/// engine on every worker.
macro_rules! engine_device {
    ($engine:ident, $device:ty) => {
        impl $crate::aes::Engine for $engine {
            fn new(cipher: $crate::aes::Cipher, key: &[u8]) -> $crate::error::Result<Self> {
                $engine::new(cipher, key)
            }

            fn encrypt(
                &self,
                iv: &[u8; $crate::aes::BLOCK],
                input: &[u8],
            ) -> std::result::Result<Vec<u8>, String> {
                $engine::encrypt(self, iv, input)
            }

            fn decrypt(
                &self,
                iv: &[u8; $crate::aes::BLOCK],
                input: &[u8],
            ) -> std::result::Result<Vec<u8>, String> {
                $engine::decrypt(self, iv, input)
            }
        }

        impl $crate::device::Device<$crate::aes::AesWorkload> for $device {
            fn info(&self) -> &$crate::device::DeviceInfo {
                &self.info
            }

            fn open<'w>(
                &'w self,
                work: &'w $crate::aes::AesWorkload,
            ) -> $crate::error::Result<Vec<Box<dyn $crate::device::Worker<Vec<u8>> + 'w>>> {
                $crate::aes::open_engine_workers::<$engine>(&self.info, work)
            }
        }
    };
}

pub mod cpu;
pub mod gpu;
#[cfg(target_os = "linux")]
pub mod kernel;
pub mod soft;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use zeroize::Zeroizing;

use crate::device::{DeviceInfo, Worker, Workload};
use crate::error::{DeviceError, Result};

/// AES block length in bytes.
pub const BLOCK: usize = 16;
/// GCM tag length in bytes.
pub const TAG: usize = 16;
/// GCM nonce length in bytes.
pub const NONCE: usize = 12;

/// The cipher and mode of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Cipher {
    /// AES-128 in CBC mode with PKCS#7 padding (the paper's main cipher).
    Aes128Cbc,
    /// AES-192-CBC with PKCS#7 padding (paper appendix).
    Aes192Cbc,
    /// AES-256-CBC with PKCS#7 padding (paper appendix).
    Aes256Cbc,
    /// AES-256-GCM with a 12-byte nonce and a 16-byte tag, the modern default.
    Aes256Gcm,
}

impl Cipher {
    /// Every cipher, in the order tables show them.
    pub const ALL: [Cipher; 4] = [
        Cipher::Aes128Cbc,
        Cipher::Aes192Cbc,
        Cipher::Aes256Cbc,
        Cipher::Aes256Gcm,
    ];

    /// OpenSSL-style name, e.g. `aes-128-cbc`.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Cbc => "aes-128-cbc",
            Cipher::Aes192Cbc => "aes-192-cbc",
            Cipher::Aes256Cbc => "aes-256-cbc",
            Cipher::Aes256Gcm => "aes-256-gcm",
        }
    }

    /// Parses an OpenSSL-style name.
    pub fn parse(s: &str) -> Result<Cipher> {
        Cipher::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                DeviceError::InvalidParameter(format!(
                    "unknown cipher `{s}`; choose one of aes-128-cbc, aes-192-cbc, aes-256-cbc, aes-256-gcm"
                ))
            })
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Cbc => 16,
            Cipher::Aes192Cbc => 24,
            Cipher::Aes256Cbc | Cipher::Aes256Gcm => 32,
        }
    }

    /// Whether this is an AEAD mode (GCM).
    pub fn is_gcm(self) -> bool {
        matches!(self, Cipher::Aes256Gcm)
    }

    /// Length of the encryption of `len` plaintext bytes.
    pub fn ciphertext_len(self, len: usize) -> usize {
        if self.is_gcm() {
            len + TAG
        } else {
            (len / BLOCK + 1) * BLOCK
        }
    }
}

/// Encryption or decryption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Plaintext in, ciphertext out.
    Encrypt,
    /// Ciphertext in, plaintext out.
    Decrypt,
}

impl Direction {
    /// "encrypt" or "decrypt".
    pub fn name(self) -> &'static str {
        match self {
            Direction::Encrypt => "encrypt",
            Direction::Decrypt => "decrypt",
        }
    }
}

/// A list of AES items with one key, their IVs and their expected outputs.
pub struct AesWorkload {
    cipher: Cipher,
    direction: Direction,
    key: Zeroizing<Vec<u8>>,
    ivs: Vec<[u8; BLOCK]>,
    input: Vec<u8>,
    input_at: Vec<usize>,
    expected: Vec<u8>,
    expected_at: Vec<usize>,
    reference: bool,
}

impl std::fmt::Debug for AesWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("AesWorkload")
            .field("cipher", &self.cipher)
            .field("direction", &self.direction)
            .field("items", &self.ivs.len())
            .field("bytes", &self.input.len())
            .finish_non_exhaustive()
    }
}

/// Largest item accepted (1 GiB); AF_ALG and GCM both limit single messages.
pub const MAX_ITEM: usize = 1 << 30;

impl AesWorkload {
    /// `count` items of `size` bytes each (the paper's workload for one size).
    pub fn uniform(
        cipher: Cipher,
        direction: Direction,
        size: usize,
        count: usize,
        seed: u64,
    ) -> Result<Self> {
        Self::generate(cipher, direction, &vec![size; count], seed)
    }

    /// `count_per_size` items of each size, shuffled (a mixed queue, where size-aware placement matters).
    pub fn mixed(
        cipher: Cipher,
        direction: Direction,
        sizes: &[usize],
        count_per_size: usize,
        seed: u64,
    ) -> Result<Self> {
        let mut all: Vec<usize> = sizes
            .iter()
            .flat_map(|&s| std::iter::repeat_n(s, count_per_size))
            .collect();
        let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5eed_0001);
        for i in (1..all.len()).rev() {
            let j = rng.gen_range(0..=i);
            all.swap(i, j);
        }
        Self::generate(cipher, direction, &all, seed)
    }

    /// Items of the given plaintext sizes: a fresh key and fresh IVs from the OS CSPRNG, payloads from a
    /// ChaCha20 stream seeded by `seed`, expected outputs from the reference engine.
    pub fn generate(
        cipher: Cipher,
        direction: Direction,
        sizes: &[usize],
        seed: u64,
    ) -> Result<Self> {
        if sizes.is_empty() {
            return Err(DeviceError::InvalidParameter(
                "a workload needs at least one item".into(),
            ));
        }
        if let Some(&s) = sizes.iter().find(|&&s| s > MAX_ITEM) {
            return Err(DeviceError::InvalidParameter(format!(
                "item of {s} bytes is larger than the {MAX_ITEM}-byte limit; split it"
            )));
        }
        let mut os = rand::rngs::OsRng;
        let mut key = Zeroizing::new(vec![0u8; cipher.key_len()]);
        os.fill_bytes(&mut key);
        let ivs: Vec<[u8; BLOCK]> = sizes
            .iter()
            .map(|_| {
                let mut iv = [0u8; BLOCK];
                os.fill_bytes(&mut iv);
                iv
            })
            .collect();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut plain = vec![0u8; sizes.iter().sum()];
        rng.fill_bytes(&mut plain);
        let mut plain_at = Vec::with_capacity(sizes.len() + 1);
        plain_at.push(0);
        for &s in sizes {
            plain_at.push(plain_at[plain_at.len() - 1] + s);
        }
        let engine = cpu::CpuEngine::new(cipher, &key)?;
        let mut cipher_bytes =
            Vec::with_capacity(sizes.iter().map(|&s| cipher.ciphertext_len(s)).sum());
        let mut cipher_at = Vec::with_capacity(sizes.len() + 1);
        cipher_at.push(0);
        for (i, iv) in ivs.iter().enumerate() {
            let ct = engine
                .encrypt(iv, &plain[plain_at[i]..plain_at[i + 1]])
                .map_err(|what| DeviceError::Crypto {
                    device: "reference".into(),
                    item: i,
                    what,
                })?;
            cipher_bytes.extend_from_slice(&ct);
            cipher_at.push(cipher_bytes.len());
        }
        let (input, input_at, expected, expected_at) = match direction {
            Direction::Encrypt => (plain, plain_at, cipher_bytes, cipher_at),
            Direction::Decrypt => (cipher_bytes, cipher_at, plain, plain_at),
        };
        Ok(AesWorkload {
            cipher,
            direction,
            key,
            ivs,
            input,
            input_at,
            expected,
            expected_at,
            reference: true,
        })
    }

    /// Builds a workload from caller-supplied items (plaintexts for encryption, ciphertexts for decryption);
    /// expected outputs come from the reference engine.
    pub fn from_items(
        cipher: Cipher,
        direction: Direction,
        key: &[u8],
        ivs: Vec<[u8; BLOCK]>,
        items: &[&[u8]],
    ) -> Result<Self> {
        Self::build(cipher, direction, key, ivs, items, true)
    }

    /// Like [`AesWorkload::from_items`] but without reference outputs: for bulk work where computing everything
    /// twice would halve the speed. [`AesWorkload::verify`] then refuses to run; corrupted inputs to a
    /// decryption still fail on the device with a clear error.
    pub fn for_bulk(
        cipher: Cipher,
        direction: Direction,
        key: &[u8],
        ivs: Vec<[u8; BLOCK]>,
        items: &[&[u8]],
    ) -> Result<Self> {
        Self::build(cipher, direction, key, ivs, items, false)
    }

    fn build(
        cipher: Cipher,
        direction: Direction,
        key: &[u8],
        ivs: Vec<[u8; BLOCK]>,
        items: &[&[u8]],
        reference: bool,
    ) -> Result<Self> {
        if key.len() != cipher.key_len() {
            return Err(DeviceError::InvalidParameter(format!(
                "{} needs a {}-byte key, got {} bytes",
                cipher.name(),
                cipher.key_len(),
                key.len()
            )));
        }
        if ivs.len() != items.len() {
            return Err(DeviceError::InvalidParameter(format!(
                "{} IVs for {} items; give one IV per item",
                ivs.len(),
                items.len()
            )));
        }
        let engine = cpu::CpuEngine::new(cipher, key)?;
        let mut input = Vec::new();
        let mut input_at = vec![0];
        let mut expected = Vec::new();
        let mut expected_at = vec![0];
        for (i, (item, iv)) in items.iter().zip(&ivs).enumerate() {
            if item.len() > MAX_ITEM {
                return Err(DeviceError::InvalidParameter(format!(
                    "item {i} is larger than {MAX_ITEM} bytes"
                )));
            }
            if reference {
                let out = match direction {
                    Direction::Encrypt => engine.encrypt(iv, item),
                    Direction::Decrypt => engine.decrypt(iv, item),
                }
                .map_err(|what| DeviceError::Crypto {
                    device: "reference".into(),
                    item: i,
                    what,
                })?;
                expected.extend_from_slice(&out);
            }
            input.extend_from_slice(item);
            input_at.push(input.len());
            expected_at.push(expected.len());
        }
        Ok(AesWorkload {
            cipher,
            direction,
            key: Zeroizing::new(key.to_vec()),
            ivs,
            input,
            input_at,
            expected,
            expected_at,
            reference,
        })
    }

    /// The cipher.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The direction.
    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// The key (for devices opening sessions; never logged).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// IV of item `i` (GCM uses its first 12 bytes as the nonce).
    pub fn iv(&self, i: usize) -> &[u8; BLOCK] {
        &self.ivs[i]
    }

    /// Input bytes of item `i`.
    pub fn input(&self, i: usize) -> &[u8] {
        &self.input[self.input_at[i]..self.input_at[i + 1]]
    }

    /// Expected output of item `i`.
    pub fn expected(&self, i: usize) -> &[u8] {
        &self.expected[self.expected_at[i]..self.expected_at[i + 1]]
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> usize {
        self.input.len()
    }

    /// Whether reference outputs were computed (not for [`AesWorkload::for_bulk`]).
    pub fn has_reference(&self) -> bool {
        self.reference
    }

    /// Checks every output against the reference, naming the first item that differs.
    pub fn verify(&self, outputs: &[Vec<u8>], producer: &dyn Fn(usize) -> String) -> Result<()> {
        if !self.reference {
            return Err(DeviceError::InvalidParameter(
                "this workload was built without reference outputs (for_bulk); build it with from_items to verify".into(),
            ));
        }
        if outputs.len() != self.len() {
            return Err(DeviceError::InvalidParameter(format!(
                "{} outputs for {} items",
                outputs.len(),
                self.len()
            )));
        }
        for (i, out) in outputs.iter().enumerate() {
            let want = self.expected(i);
            if out.as_slice() != want {
                let what = if out.len() != want.len() {
                    format!("{} bytes instead of {}", out.len(), want.len())
                } else {
                    let at = out.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
                    format!("first difference at byte {at}")
                };
                return Err(DeviceError::Mismatch {
                    device: producer(i),
                    item: i,
                    what,
                });
            }
        }
        Ok(())
    }
}

impl Workload for AesWorkload {
    type Output = Vec<u8>;

    fn len(&self) -> usize {
        self.ivs.len()
    }

    fn weight(&self, i: usize) -> u64 {
        (self.input_at[i + 1] - self.input_at[i]) as u64
    }
}

/// A keyed AES engine of one of the CPU-run devices: builds from a key, then encrypts or decrypts one item in
/// the workload's format (CBC with PKCS#7, or GCM with the tag appended).
pub trait Engine: Send + Sized {
    /// Expands `key` for `cipher`.
    fn new(cipher: Cipher, key: &[u8]) -> Result<Self>;
    /// Encrypts one item.
    fn encrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String>;
    /// Decrypts one item, checking padding or tag.
    fn decrypt(&self, iv: &[u8; BLOCK], input: &[u8]) -> std::result::Result<Vec<u8>, String>;
}

/// A worker running one engine on the items of a workload.
struct EngineWorker<'w, E> {
    work: &'w AesWorkload,
    engine: E,
    name: &'w str,
}

impl<E: Engine> Worker<Vec<u8>> for EngineWorker<'_, E> {
    fn run(&mut self, item: usize) -> Result<Vec<u8>> {
        let (iv, input) = (self.work.iv(item), self.work.input(item));
        match self.work.direction() {
            Direction::Encrypt => self.engine.encrypt(iv, input),
            Direction::Decrypt => self.engine.decrypt(iv, input),
        }
        .map_err(|what| DeviceError::Crypto {
            device: self.name.to_string(),
            item,
            what,
        })
    }
}

/// One worker per `info.workers`, each with its own keyed engine `E`.
pub(crate) fn open_engine_workers<'w, E: Engine + 'w>(
    info: &'w DeviceInfo,
    work: &'w AesWorkload,
) -> Result<Vec<Box<dyn Worker<Vec<u8>> + 'w>>> {
    (0..info.workers)
        .map(|_| {
            let engine = E::new(work.cipher(), work.key())?;
            Ok(Box::new(EngineWorker {
                work,
                engine,
                name: &info.name,
            }) as Box<dyn Worker<Vec<u8>> + 'w>)
        })
        .collect()
}

/// Appends PKCS#7 padding to a plaintext (1..=16 bytes, each the pad length).
pub(crate) fn pkcs7_pad(out: &mut Vec<u8>) {
    let pad = BLOCK - out.len() % BLOCK;
    out.extend(std::iter::repeat_n(pad as u8, pad));
}

/// Checks and strips PKCS#7 padding.
pub(crate) fn pkcs7_unpad(out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let n = out.len();
    let pad = *out.last().ok_or("empty CBC ciphertext")? as usize;
    if !n.is_multiple_of(BLOCK) || pad == 0 || pad > BLOCK || pad > n {
        return Err("bad PKCS#7 padding (wrong key, IV or corrupted ciphertext)".into());
    }
    // Check every pad byte without an early exit.
    let bad = out[n - pad..]
        .iter()
        .fold(0u8, |acc, &b| acc | (b ^ pad as u8));
    if bad != 0 {
        return Err("bad PKCS#7 padding (wrong key, IV or corrupted ciphertext)".into());
    }
    out.truncate(n - pad);
    Ok(())
}

/// Random IVs for callers building their own workloads.
pub fn random_ivs(n: usize) -> Vec<[u8; BLOCK]> {
    let mut os = rand::rngs::OsRng;
    (0..n)
        .map(|_| {
            let mut iv = [0u8; BLOCK];
            os.fill_bytes(&mut iv);
            iv
        })
        .collect()
}
