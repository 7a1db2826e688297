//! A versioned, checked binary format for parameters, ciphertexts, plaintexts, public keys,
//! secret keys (for the client's own storage), switching keys and evaluation keys.
//!
//! Everything is little-endian and written by hand (no serde). An object is a 32-byte header,
//! the payload, and an 8-byte checksum (format version 2):
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | magic `"HELM"` ([`MAGIC`])                                   |
//! | 4      | 2    | format version ([`FORMAT_VERSION`])                          |
//! | 6      | 1    | object kind ([`ObjectKind`], 1..=8)                          |
//! | 7      | 1    | word size in bits (32 or 64; 0 for a task graph)             |
//! | 8      | 8    | parameter fingerprint ([`CkksParameters::fingerprint`])      |
//! | 16     | 8    | object fingerprint (below)                                   |
//! | 24     | 8    | payload length in bytes                                      |
//! | 32     | len  | payload                                                      |
//! | 32+len | 8    | XXH3-64 (seed 0) of everything before it                     |
//!
//! The parameter fingerprint covers everything that changes the meaning of an object made for
//! them: ring degree, word size, every ciphertext and special prime, dnum, security level and
//! secret distribution. The object fingerprint ([`object_fingerprint`]) adds what changes the
//! meaning of this one object: its kind, and the level, size, slots and scale of a ciphertext
//! or plaintext, the role (relinearization, or the Galois element) of a switching key, the key
//! list of evaluation keys. A loader checks the checksum before it reads anything else, then
//! the parameter fingerprint against its context, then every field, and finally recomputes the
//! object fingerprint from what it read.
//!
//! Payloads (`poly` is a packed polynomial, below; `seed` is 32 bytes):
//!
//! | kind            | payload                                                                 |
//! |-----------------|-------------------------------------------------------------------------|
//! | Parameters      | `n u32, #q u16, q u64.., #p u16, p u64.., dnum u16, scale f64, security u16 (0/128/192/256), secret u8 (0 ternary, 1 fixed weight), weight u32` |
//! | Ciphertext      | `level u16, size u8 (2..=3), form u8 (1 = NTT, the only form read), flags u8 (bit 0 seeded), slots u32, scale f64, [seed], poly x (size, or 1 when seeded)` |
//! | Plaintext       | `level u16, form u8, slots u32, scale f64, poly`                        |
//! | PublicKey       | `seed, poly` (`b` over `q_0..q_L, P`; `a` is expanded from the seed)    |
//! | SecretKey       | `reserved u8 (0), weight u32 (non-zero coefficients)`, then the `N` ternary coefficients at 2 bits each (0, 1 = +1, 2 = -1) |
//! | SwitchingKey    | `role u8 (0 generic, 1 relinearization, 2 Galois), [g u64, step u32, conjugate u8 when Galois], dnum u16, (seed, poly) x dnum` (over `q_0..q_L, P`) |
//! | EvaluationKeys  | `flags u8 (bit 0 relin), count u32, [relinearization key payload], Galois key payload x count`, Galois elements strictly increasing |
//!
//! A Galois key stores its element `g` together with the rotation it performs, `g = ±5^step
//! mod 2N`, and the loader checks that they agree.
//!
//! A packed polynomial is `limbs u16`, one width byte per limb, then each limb's `N`
//! coefficients bit-packed (least significant bit first) at that width. The writer uses the bit
//! length of the limb's largest coefficient, which for the uniform-looking NTT-form limbs of
//! keys and ciphertexts is the bit length of the prime: a 40-bit prime in a 64-bit word takes
//! 40/64 of the raw size (a prime just above a power of two, `2^40 + c`, packs at 40 bits: no
//! uniform residue reaches its top bit). The reader accepts widths from 1 up to the bit length
//! of the limb's prime and checks that every coefficient is below its prime.
//!
//! Lengths are never trusted: the header's payload length must match the bytes exactly, counts
//! are checked against a cap and the bytes that remain before anything is allocated, and since
//! a packed coefficient takes at least one bit, what a loader allocates stays within about 128
//! times the input size (64 for bit-to-word, 2 for a seed-expanded half).
//!
//! Uniform halves are stored as their 32-byte seed and re-expanded on load with
//! [`heloom_math::sampler::uniform_from_seed`] over the basis they were generated on: the
//! public key's `a` over `q_0..q_L, P`, each switching-key digit's `a_j` over the full basis,
//! and the `c_1` of a fresh symmetric ciphertext over `q_0..q_level`.
//!
//! Secret keys: a secret key is its own kind, so every loader of a public object refuses one
//! with an error that says so (a server never takes a secret key by mistake).
//!
//! Version 1 (a 24-byte header without the object fingerprint, no checksum, switching keys
//! without a role) is not loaded by `from_bytes`: without a checksum a corrupted object cannot
//! be told from a valid one. [`upgrade_v1`] and [`upgrade_v1_params`] read it once, with every
//! field re-validated, and return version-2 bytes.
//!
//! Errors: bytes that are not a valid object give [`CkksError::Format`]; valid bytes made for
//! another word size or other parameters than the context they are loaded with give
//! [`CkksError::ParameterMismatch`].

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::keys::{uniform_poly, EvaluationKeys, KeyRole, PublicKey, SecretKey, SwitchingKey};
use crate::params::{CkksParameters, SecretDistribution};
use crate::security::SecurityLevel;
use heloom_math::automorphism::galois_element_for_step;
use heloom_math::sampler::Seed;
use heloom_math::{Form, RnsBasis, RnsPoly, Word};
use std::collections::BTreeMap;
use std::fmt;
use xxhash_rust::xxh3::xxh3_64;

/// Version of the format written by this build (the one `from_bytes` reads; version 1 goes
/// through [`upgrade_v1`]).
pub const FORMAT_VERSION: u16 = 2;

/// The four bytes every heloom object starts with.
pub const MAGIC: [u8; 4] = *b"HELM";

/// Size of the header in bytes.
pub const HEADER_LEN: usize = 32;

/// Size of the checksum after the payload in bytes.
pub const CHECKSUM_LEN: usize = 8;

/// Size of the version-1 header in bytes.
const HEADER_LEN_V1: usize = 24;

/// Largest payload the reader accepts (1 TiB); anything larger is treated as corrupted.
pub const MAX_PAYLOAD_BYTES: u64 = 1 << 40;

/// Largest number of ciphertext primes or special primes in stored parameters.
const MAX_PRIMES: usize = 1024;

/// Seed length in bytes.
const SEED_LEN: usize = 32;

/// What a serialized object holds (byte 6 of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// [`CkksParameters`].
    Parameters,
    /// [`Ciphertext`].
    Ciphertext,
    /// [`Plaintext`].
    Plaintext,
    /// [`PublicKey`].
    PublicKey,
    /// [`SwitchingKey`].
    SwitchingKey,
    /// [`EvaluationKeys`].
    EvaluationKeys,
    /// [`SecretKey`] (client-side storage only).
    SecretKey,
    /// A task graph of the runtime (`heloom_runtime::TaskGraph`), framed with [`seal`].
    TaskGraph,
}

impl ObjectKind {
    /// Every kind, by code.
    pub const ALL: [ObjectKind; 8] = [
        ObjectKind::Parameters,
        ObjectKind::Ciphertext,
        ObjectKind::Plaintext,
        ObjectKind::PublicKey,
        ObjectKind::SwitchingKey,
        ObjectKind::EvaluationKeys,
        ObjectKind::SecretKey,
        ObjectKind::TaskGraph,
    ];

    /// The byte stored in the header.
    pub fn code(self) -> u8 {
        match self {
            ObjectKind::Parameters => 1,
            ObjectKind::Ciphertext => 2,
            ObjectKind::Plaintext => 3,
            ObjectKind::PublicKey => 4,
            ObjectKind::SwitchingKey => 5,
            ObjectKind::EvaluationKeys => 6,
            ObjectKind::SecretKey => 7,
            ObjectKind::TaskGraph => 8,
        }
    }

    /// The kind stored as `code`, if any.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The Rust type name of the kind (`"Ciphertext"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Parameters => "CkksParameters",
            ObjectKind::Ciphertext => "Ciphertext",
            ObjectKind::Plaintext => "Plaintext",
            ObjectKind::PublicKey => "PublicKey",
            ObjectKind::SwitchingKey => "SwitchingKey",
            ObjectKind::EvaluationKeys => "EvaluationKeys",
            ObjectKind::SecretKey => "SecretKey",
            ObjectKind::TaskGraph => "TaskGraph",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn format_err(msg: String) -> CkksError {
    CkksError::Format(msg)
}

/// The kind of a serialized object (version 1 or 2) from its first 7 bytes (magic, version,
/// kind); the rest of the object is not checked.
pub fn peek_kind(bytes: &[u8]) -> Result<ObjectKind> {
    check_magic(bytes)?;
    kind_of(bytes[6])
}

/// What the header of a version-2 object says, after its checksum was verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderInfo {
    /// What the object holds.
    pub kind: ObjectKind,
    /// Word size in bits (32 or 64).
    pub word_bits: u32,
    /// Fingerprint of the parameters it was made for.
    pub params_fingerprint: u64,
    /// Fingerprint of its meaning ([`object_fingerprint`]).
    pub object_fingerprint: u64,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Checks the magic, the version, the length and the checksum of a version-2 object and
/// returns its header. The payload itself is checked by the kind's loader.
pub fn peek_header(bytes: &[u8]) -> Result<HeaderInfo> {
    Ok(read_header(bytes)?.0.info)
}

/// Checks the magic and returns the version (1 or 2).
fn check_magic(bytes: &[u8]) -> Result<u16> {
    if bytes.len() < 4 || bytes[..4] != MAGIC {
        let shown = &bytes[..bytes.len().min(4)];
        return Err(format_err(format!(
            "not a heloom object: it starts with {shown:02x?} instead of the magic bytes \"HELM\" (48 45 4c 4d)"
        )));
    }
    if bytes.len() < 7 {
        return Err(format_err(format!(
            "truncated heloom object: only {} bytes, the header alone has {HEADER_LEN}",
            bytes.len()
        )));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != FORMAT_VERSION && version != 1 {
        return Err(format_err(format!(
            "format version {version} is not supported: this build reads version {FORMAT_VERSION} (and converts version 1 with upgrade_v1); corrupted data, or an object from a newer heloom: load it with that version"
        )));
    }
    Ok(version)
}

fn kind_of(code: u8) -> Result<ObjectKind> {
    ObjectKind::from_code(code).ok_or_else(|| {
        format_err(format!(
            "unknown object kind {code}: kinds 1..=8 (parameters, ciphertext, plaintext, public key, switching key, evaluation keys, secret key, task graph) exist; corrupted data or a newer format"
        ))
    })
}

/// The object fingerprint: XXH3-64 over the parameter fingerprint, the kind, the word size and
/// the words that describe one object (its `descriptor`: level, size, slots and scale bits of a
/// ciphertext; level, slots and scale bits of a plaintext; role and Galois element of a
/// switching key; relinearization flag, count and Galois elements of evaluation keys; nothing
/// for parameters and public and secret keys).
pub fn object_fingerprint(
    params_fingerprint: u64,
    kind: ObjectKind,
    word_bits: u32,
    descriptor: &[u64],
) -> u64 {
    let mut buf = Vec::with_capacity(8 * (3 + descriptor.len()));
    buf.extend_from_slice(&params_fingerprint.to_le_bytes());
    buf.extend_from_slice(&u64::from(kind.code()).to_le_bytes());
    buf.extend_from_slice(&u64::from(word_bits).to_le_bytes());
    for d in descriptor {
        buf.extend_from_slice(&d.to_le_bytes());
    }
    xxh3_64(&buf)
}

/// A checked header.
struct Header {
    version: u16,
    info: HeaderInfo,
}

fn truncated_header(len: usize, need: usize) -> CkksError {
    format_err(format!(
        "truncated heloom object: only {len} bytes, the header and checksum alone have {need}"
    ))
}

/// Checks the header (and, for version 2, the checksum) and returns it with a reader over the
/// payload. Version 1 is accepted only when `allow_v1` (by the upgrade functions).
fn parse_header(bytes: &[u8], allow_v1: bool) -> Result<(Header, Reader<'_>)> {
    let version = check_magic(bytes)?;
    if version == 1 && !allow_v1 {
        return Err(format_err(
            "format version 1 carries no checksum, so this build does not load it directly (a corrupted version-1 object cannot be told from a valid one); if you trust where it came from, convert it once with heloom_ckks::serialize::upgrade_v1 (Python: heloom.upgrade_v1; command line: heloom format upgrade), which re-validates every field, and store the version-2 bytes it returns".into(),
        ));
    }
    let (head, tail) = if version == 1 {
        (HEADER_LEN_V1, 0)
    } else {
        (HEADER_LEN, CHECKSUM_LEN)
    };
    if bytes.len() < head + tail {
        return Err(truncated_header(bytes.len(), head + tail));
    }
    let mut r = Reader::new(&bytes[8..head], 8, "header");
    let params_fingerprint = r.u64("fingerprint")?;
    let object_fingerprint = if version == 1 {
        0
    } else {
        r.u64("object fingerprint")?
    };
    let len = r.u64("payload length")?;
    let rest = (bytes.len() - head - tail) as u64;
    let what = kind_of(bytes[6]).map_or("object", ObjectKind::name);
    if len > MAX_PAYLOAD_BYTES {
        return Err(format_err(format!(
            "the header declares a payload of {len} bytes, above the {MAX_PAYLOAD_BYTES}-byte limit: corrupted length"
        )));
    }
    if len > rest {
        return Err(format_err(format!(
            "truncated {what}: the header declares {len} payload bytes but only {rest} follow; the data was cut short"
        )));
    }
    if len < rest {
        return Err(format_err(format!(
            "{} trailing bytes after this {what}: pass exactly one object",
            rest - len
        )));
    }
    let body_end = head + len as usize;
    if version != 1 {
        let mut c = [0u8; CHECKSUM_LEN];
        c.copy_from_slice(&bytes[body_end..]);
        let stored = u64::from_le_bytes(c);
        let actual = xxh3_64(&bytes[..body_end]);
        if stored != actual {
            return Err(format_err(format!(
                "checksum mismatch: this {what} was corrupted in storage or transit (stored XXH3 {stored:016x}, computed {actual:016x}); fetch or write it again"
            )));
        }
    }
    let kind = kind_of(bytes[6])?;
    let word_bits = u32::from(bytes[7]);
    // Task graphs do not depend on the word size: they store 0.
    let graph_ok = kind == ObjectKind::TaskGraph && word_bits == 0;
    if word_bits != 32 && word_bits != 64 && !graph_ok {
        return Err(format_err(format!(
            "word size {word_bits} bits in the header: only 32 and 64 exist; corrupted data"
        )));
    }
    Ok((
        Header {
            version,
            info: HeaderInfo {
                kind,
                word_bits,
                params_fingerprint,
                object_fingerprint,
                payload_len: len,
            },
        },
        Reader::new(&bytes[head..body_end], head, kind.name()),
    ))
}

/// A version-2 header and its payload reader.
fn read_header(bytes: &[u8]) -> Result<(Header, Reader<'_>)> {
    parse_header(bytes, false)
}

/// Errors unless the header holds `kind`; a secret key where a public object is expected gets
/// its own message.
fn check_kind(h: &Header, kind: ObjectKind) -> Result<()> {
    if h.info.kind == kind {
        return Ok(());
    }
    if h.info.kind == ObjectKind::SecretKey {
        return Err(format_err(format!(
            "these bytes hold a SecretKey, refused where a {kind} is expected: a secret key never leaves the client; send the public key or evaluation keys instead"
        )));
    }
    Err(format_err(format!(
        "these bytes hold a {}, not a {kind}; load them with {}::from_bytes",
        h.info.kind, h.info.kind
    )))
}

/// Checks the header of an object of `kind` to be loaded into `ctx` (`fingerprint` is the
/// context's fingerprint as the header's version stores it).
fn expect_kind<W: Word>(h: &Header, kind: ObjectKind, fingerprint: u64) -> Result<()> {
    check_kind(h, kind)?;
    if h.info.word_bits != W::BITS {
        return Err(CkksError::ParameterMismatch(format!(
            "this {kind} was made for {}-bit words but is being loaded as {kind}<u{}>; load it with a Context<u{}>",
            h.info.word_bits,
            W::BITS,
            h.info.word_bits
        )));
    }
    if h.info.params_fingerprint != fingerprint {
        return Err(CkksError::ParameterMismatch(format!(
            "this {kind} was made for other parameters (fingerprint {:016x}, context {fingerprint:016x}); load it with the context it was created with",
            h.info.params_fingerprint,
        )));
    }
    Ok(())
}

/// Checks a version-2 header for `kind` against `ctx` and returns the payload reader.
fn expect_header<'a, W: Word>(
    ctx: &Context<W>,
    bytes: &'a [u8],
    kind: ObjectKind,
) -> Result<(Header, Reader<'a>)> {
    let (h, r) = read_header(bytes)?;
    expect_kind::<W>(&h, kind, ctx.fingerprint())?;
    Ok((h, r))
}

/// Loads a version-2 object of `kind` made for `ctx`: the header checks, then `parse` (which
/// [`upgrade_v1`] runs on version-1 payloads too) on the payload.
fn load<'a, W: Word, T>(
    ctx: &Context<W>,
    bytes: &'a [u8],
    kind: ObjectKind,
    parse: impl FnOnce(&Context<W>, &Header, Reader<'a>) -> Result<T>,
) -> Result<T> {
    let (h, r) = expect_header(ctx, bytes, kind)?;
    parse(ctx, &h, r)
}

/// Frames `payload` as a version-2 object of `kind`: the header (with the object fingerprint
/// of `descriptor`) and the checksum. For objects of other crates (task graphs).
pub fn seal(
    kind: ObjectKind,
    word_bits: u32,
    params_fingerprint: u64,
    descriptor: &[u64],
    payload: &[u8],
) -> Vec<u8> {
    let mut out = begin(
        kind,
        word_bits,
        params_fingerprint,
        descriptor,
        payload.len(),
    );
    out.extend_from_slice(payload);
    end(out)
}

/// Checks a version-2 object of `kind` framed by [`seal`] (magic, version, length, checksum,
/// kind) and returns its header and payload. The caller parses the payload and then checks
/// the object fingerprint with [`check_fingerprint`].
pub fn open(bytes: &[u8], kind: ObjectKind) -> Result<(HeaderInfo, &[u8])> {
    let (h, r) = read_header(bytes)?;
    check_kind(&h, kind)?;
    Ok((h.info, r.bytes))
}

/// Errors unless `computed`, the object fingerprint of what was parsed, matches the header's.
pub fn check_fingerprint(info: &HeaderInfo, computed: u64) -> Result<()> {
    check_object_fingerprint(
        &Header {
            version: FORMAT_VERSION,
            info: *info,
        },
        computed,
    )
}

/// Errors unless the object fingerprint recomputed from what was read matches the header's.
/// Fuzzing builds (`cfg(fuzzing)`, set by cargo-fuzz) skip this one check so that the fuzzer,
/// which reseals the checksum itself, reaches every field check; a 64-bit hash of the parsed
/// fields is otherwise a wall it cannot get past.
fn check_object_fingerprint(h: &Header, computed: u64) -> Result<()> {
    if cfg!(fuzzing) {
        return Ok(());
    }
    if h.version != 1 && h.info.object_fingerprint != computed {
        return Err(format_err(format!(
            "the header's object fingerprint {:016x} does not match the {} read (fingerprint {computed:016x}): the object was altered after it was written",
            h.info.object_fingerprint, h.info.kind
        )));
    }
    Ok(())
}

// ----- writing -----

/// Starts an object: the header with a zero payload length (patched by [`end`]).
fn begin(
    kind: ObjectKind,
    word_bits: u32,
    fingerprint: u64,
    descriptor: &[u64],
    capacity: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + capacity + CHECKSUM_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(kind.code());
    out.push(word_bits as u8);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    let object = object_fingerprint(fingerprint, kind, word_bits, descriptor);
    out.extend_from_slice(&object.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out
}

/// Patches the payload length into the header and appends the checksum.
fn end(mut out: Vec<u8>) -> Vec<u8> {
    let len = (out.len() - HEADER_LEN) as u64;
    out[24..HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn put_u16(out: &mut Vec<u8>, v: usize) {
    // Every count written here (levels, limbs, dnum, primes) is far below 2^16.
    out.extend_from_slice(&(v as u16).to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u32).to_le_bytes());
}

fn form_code(form: Form) -> u8 {
    match form {
        Form::Coeff => 0,
        Form::Ntt => 1,
    }
}

/// Bytes taken by `n` coefficients packed at `width` bits.
fn packed_len(n: usize, width: u32) -> usize {
    (n * width as usize).div_ceil(8)
}

/// Bytes a packed polynomial takes (for capacity hints).
fn poly_len_hint<W: Word>(p: &RnsPoly<W>) -> usize {
    2 + p.num_limbs() + p.as_slice().len() * W::BITS as usize / 8
}

/// Writes a packed polynomial: limb count, one width byte per limb, the packed limbs.
fn put_poly<W: Word>(out: &mut Vec<u8>, p: &RnsPoly<W>) {
    put_u16(out, p.num_limbs());
    let widths: Vec<u32> = p
        .limbs()
        .map(|l| {
            let or = l.iter().fold(0u64, |a, &v| a | v.to_u64());
            (64 - or.leading_zeros()).max(1)
        })
        .collect();
    out.extend(widths.iter().map(|&w| w as u8));
    for (limb, &w) in p.limbs().zip(&widths) {
        pack(out, limb, w);
    }
}

/// Packs `limb` at `w` bits per coefficient, least significant bit first.
fn pack<W: Word>(out: &mut Vec<u8>, limb: &[W], w: u32) {
    // Sized once and written in 8-byte words: no capacity check per coefficient (results
    // are serialized on the server's path from a job's end to its stored result).
    let start = out.len();
    out.resize(start + packed_len(limb.len(), w), 0);
    let dst = &mut out[start..];
    let mut at = 0;
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    for &v in limb {
        acc |= u128::from(v.to_u64()) << nbits;
        nbits += w;
        if nbits >= 64 {
            dst[at..at + 8].copy_from_slice(&(acc as u64).to_le_bytes());
            at += 8;
            acc >>= 64;
            nbits -= 64;
        }
    }
    // What is left: the last `nbits` bits, at most 8 bytes.
    let tail = dst.len() - at;
    dst[at..].copy_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

/// The `(step, conjugate)` with `g = ±5^step mod 2N` (every odd `g` has one).
fn galois_step(n: usize, g: u64) -> (u32, bool) {
    let two_n = 2 * n as u64;
    let mut e = 1u64;
    for k in 0..(n / 2).max(1) {
        if e == g {
            return (k as u32, false);
        }
        if two_n - e == g {
            return (k as u32, true);
        }
        e = e * 5 % two_n;
    }
    (0, false)
}

/// The descriptor words of a switching key's role.
fn role_words(role: KeyRole) -> Vec<u64> {
    match role {
        KeyRole::Generic => vec![0],
        KeyRole::Relinearization => vec![1],
        KeyRole::Galois(g) => vec![2, g],
    }
}

fn put_switching_key<W: Word>(out: &mut Vec<u8>, k: &SwitchingKey<W>, n: usize) {
    match k.role {
        KeyRole::Generic => out.push(0),
        KeyRole::Relinearization => out.push(1),
        KeyRole::Galois(g) => {
            out.push(2);
            out.extend_from_slice(&g.to_le_bytes());
            let (step, conj) = galois_step(n, g);
            out.extend_from_slice(&step.to_le_bytes());
            out.push(u8::from(conj));
        }
    }
    put_u16(out, k.b.len());
    for (b, seed) in k.b.iter().zip(&k.seeds) {
        out.extend_from_slice(seed);
        put_poly(out, b);
    }
}

fn switching_key_hint<W: Word>(k: &SwitchingKey<W>) -> usize {
    16 + k
        .b
        .iter()
        .map(|b| SEED_LEN + poly_len_hint(b))
        .sum::<usize>()
}

// ----- reading -----

/// A bounds-checked cursor over a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes[0]` in the whole object (for messages).
    base: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], base: usize, what: &'static str) -> Self {
        Self {
            bytes,
            pos: 0,
            base,
            what,
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The error for a payload that ends at the cursor before `need` (what needs how many
    /// bytes) is met; `tail` ends the message.
    fn truncated(&self, need: &str, tail: &str) -> CkksError {
        format_err(format!(
            "truncated {}: {need} at offset {} but only {} remain{tail}",
            self.what,
            self.base + self.pos,
            self.remaining()
        ))
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.truncated(
                &format!("{field} needs {n} bytes"),
                "; the data was cut short or a length in it is corrupted",
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const K: usize>(&mut self, field: &str) -> Result<[u8; K]> {
        let mut a = [0u8; K];
        a.copy_from_slice(self.take(K, field)?);
        Ok(a)
    }

    fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &str) -> Result<usize> {
        Ok(usize::from(u16::from_le_bytes(self.array(field)?)))
    }

    fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn f64(&mut self, field: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array(field)?))
    }

    fn seed(&mut self, field: &str) -> Result<Seed> {
        self.array::<SEED_LEN>(field)
    }

    /// Errors when bytes are left over.
    fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(format_err(format!(
                "{} unused bytes at the end of this {} (from offset {}): its lengths and counts are inconsistent; corrupted data",
                self.remaining(),
                self.what,
                self.base + self.pos
            )));
        }
        Ok(())
    }
}

/// Reads the form byte: ciphertexts and plaintexts of this crate are always in NTT form (the
/// byte is kept so that a later version can store other forms).
fn read_form(r: &mut Reader<'_>) -> Result<Form> {
    match r.u8("form")? {
        1 => Ok(Form::Ntt),
        f => Err(format_err(format!(
            "{} polynomial form {f} is not supported: version {FORMAT_VERSION} stores NTT-form polynomials only (form 1); corrupted data",
            r.what
        ))),
    }
}

fn read_level<W: Word>(r: &mut Reader<'_>, ctx: &Context<W>) -> Result<usize> {
    let level = r.u16("level")?;
    if level > ctx.max_level() {
        return Err(format_err(format!(
            "{} at level {level}, but these parameters have levels 0..={}: corrupted data",
            r.what,
            ctx.max_level()
        )));
    }
    Ok(level)
}

fn read_slots<W: Word>(r: &mut Reader<'_>, ctx: &Context<W>) -> Result<usize> {
    let slots = r.u32("slots")? as usize;
    let max = ctx.params().slots();
    if !slots.is_power_of_two() || slots > max {
        return Err(format_err(format!(
            "{} with {slots} slots: slots must be a power of two from 1 to N/2 = {max}; corrupted data",
            r.what
        )));
    }
    Ok(slots)
}

/// Reads a scale: finite, at least 1 and below the modulus `Q_level` (whose log2 is
/// `log_q`), above which no value can be represented.
fn read_scale(r: &mut Reader<'_>, log_q: f64) -> Result<f64> {
    let scale = r.f64("scale")?;
    if !(scale.is_finite() && scale >= 1.0) {
        return Err(format_err(format!(
            "{} with scale {scale}: a scale must be a finite number >= 1; corrupted data",
            r.what
        )));
    }
    if scale.log2() >= log_q {
        return Err(format_err(format!(
            "{} with scale 2^{:.1}, not below its modulus 2^{log_q:.1}: no value can be represented at that scale; corrupted data",
            r.what,
            scale.log2()
        )));
    }
    Ok(scale)
}

/// log2 of the product of `basis`' primes.
fn log_modulus<W: Word>(basis: &RnsBasis<W>) -> f64 {
    basis
        .moduli()
        .iter()
        .map(|m| (m.value() as f64).log2())
        .sum()
}

/// Reads a packed polynomial over `basis`: checks the limb count, every width and that the
/// bytes are all there before allocating, then every coefficient while unpacking.
fn read_poly<W: Word>(
    r: &mut Reader<'_>,
    basis: &RnsBasis<W>,
    form: Form,
    what: &str,
    limbs_meaning: &str,
) -> Result<RnsPoly<W>> {
    let limbs = r.u16("limb count")?;
    if limbs != basis.len() {
        return Err(format_err(format!(
            "{what} has {limbs} limbs but needs {} ({limbs_meaning}): corrupted data",
            basis.len()
        )));
    }
    let widths = r.take(limbs, "limb widths")?;
    let n = basis.n();
    let mut total = 0usize;
    for (i, (&w, m)) in widths.iter().zip(basis.moduli()).enumerate() {
        let bits = m.bits();
        let w = u32::from(w);
        if w == 0 || w > bits {
            return Err(format_err(format!(
                "{what} limb {i} is packed at {w} bits but its prime {} has {bits} bits (widths 1..={bits} are valid): corrupted data",
                m.value()
            )));
        }
        total += packed_len(n, w);
    }
    if total > r.remaining() {
        return Err(r.truncated(&format!("{what} needs {total} bytes of coefficients"), ""));
    }
    let mut p = basis.zero(form);
    for (i, (&w, m)) in widths.iter().zip(basis.moduli()).enumerate() {
        let w = u32::from(w);
        let src = r.take(packed_len(n, w), "limb")?;
        unpack(src, w, m.value(), p.limb_mut(i)).map_err(|(j, v)| {
            if v == u64::MAX && j == usize::MAX {
                format_err(format!("{what} limb {i} is shorter than its width says"))
            } else {
                format_err(format!(
                    "{what} limb {i} coefficient {j} holds {v} which is not below its prime {}: corrupted data",
                    m.value()
                ))
            }
        })?;
    }
    Ok(p)
}

/// Unpacks `out.len()` coefficients of `w` bits (1..=64) from `src`, each checked below `q`.
/// Errors with `(index, value)` for a value `>= q`, or `(usize::MAX, u64::MAX)` when `src` is
/// too short.
///
/// Widths up to 57 bits take the fast path: each coefficient lies within the 8 bytes from its
/// first byte, read as one little-endian word, and the range check is folded into a flag so
/// that the loop has no early exit. Wider limbs (primes of 58 to 61 bits) use a 128-bit
/// accumulator.
fn unpack<W: Word>(
    src: &[u8],
    w: u32,
    q: u64,
    out: &mut [W],
) -> std::result::Result<(), (usize, u64)> {
    let n = out.len();
    if src.len() < packed_len(n, w) {
        return Err((usize::MAX, u64::MAX));
    }
    if w > 57 {
        return unpack_wide(src, w, q, out);
    }
    let wz = w as usize;
    let mask = (1u64 << w) - 1;
    // Coefficients whose 8-byte window lies inside `src`.
    let fast = if src.len() >= 8 {
        ((src.len() - 8) * 8 / wz + 1).min(n)
    } else {
        0
    };
    let mut bad = false;
    for (j, o) in out[..fast].iter_mut().enumerate() {
        let bit = j * wz;
        let at = bit / 8;
        let mut b = [0u8; 8];
        b.copy_from_slice(&src[at..at + 8]);
        let v = (u64::from_le_bytes(b) >> (bit % 8)) & mask;
        bad |= v >= q;
        *o = W::from_u64(v);
    }
    for (j, o) in out.iter_mut().enumerate().skip(fast) {
        let bit = j * wz;
        let at = bit / 8;
        let mut b = [0u8; 8];
        let end = src.len().min(at + 8);
        b[..end - at].copy_from_slice(&src[at..end]);
        let v = (u64::from_le_bytes(b) >> (bit % 8)) & mask;
        bad |= v >= q;
        *o = W::from_u64(v);
    }
    if bad {
        if let Some((j, v)) = out
            .iter()
            .enumerate()
            .map(|(j, v)| (j, v.to_u64()))
            .find(|&(_, v)| v >= q)
        {
            return Err((j, v));
        }
    }
    Ok(())
}

/// [`unpack`] for widths above 57 bits: a 128-bit accumulator.
fn unpack_wide<W: Word>(
    src: &[u8],
    w: u32,
    q: u64,
    out: &mut [W],
) -> std::result::Result<(), (usize, u64)> {
    let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
    let mut chunks = src.chunks(8);
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    for (j, o) in out.iter_mut().enumerate() {
        if nbits < w {
            let c = chunks.next().ok_or((usize::MAX, u64::MAX))?;
            let mut buf = [0u8; 8];
            buf[..c.len()].copy_from_slice(c);
            acc |= u128::from(u64::from_le_bytes(buf)) << nbits;
            nbits += 8 * c.len() as u32;
            if nbits < w {
                return Err((usize::MAX, u64::MAX));
            }
        }
        let v = (acc as u64) & mask;
        acc >>= w;
        nbits -= w;
        if v >= q {
            return Err((j, v));
        }
        *o = W::from_u64(v);
    }
    Ok(())
}

/// Reads the payload of a switching key (over the full basis). Version 1 stores no role: the
/// key reads as generic, and its place in evaluation keys gives it one.
fn read_switching_key<W: Word>(
    r: &mut Reader<'_>,
    ctx: &Context<W>,
    version: u16,
    name: &str,
) -> Result<SwitchingKey<W>> {
    let role = if version == 1 {
        KeyRole::Generic
    } else {
        read_role(r, ctx, name)?
    };
    let dnum = r.u16("dnum")?;
    let want = ctx.params().dnum();
    if dnum != want {
        return Err(format_err(format!(
            "{name} has {dnum} digits but these parameters use dnum = {want}: corrupted data"
        )));
    }
    let full = ctx.full_basis();
    let meaning = format!(
        "{} ciphertext primes and {} special primes",
        ctx.max_level() + 1,
        ctx.params().alpha()
    );
    // Every digit needs at least its seed, limb count and widths: refuse a dnum the bytes
    // cannot hold before allocating.
    let min_digit = SEED_LEN + 2 + full.len() + full.len() * packed_len(ctx.n(), 1);
    if dnum.saturating_mul(min_digit) > r.remaining() {
        return Err(format_err(format!(
            "truncated {}: {name} declares {dnum} digits, which need at least {} bytes, but only {} remain",
            r.what,
            dnum * min_digit,
            r.remaining()
        )));
    }
    let mut b = Vec::with_capacity(dnum);
    let mut a = Vec::with_capacity(dnum);
    let mut seeds = Vec::with_capacity(dnum);
    for j in 0..dnum {
        let seed = r.seed("digit seed")?;
        let bj = read_poly(r, full, Form::Ntt, &format!("{name} digit {j}"), &meaning)?;
        a.push(uniform_poly(&seed, full)?);
        b.push(bj);
        seeds.push(seed);
    }
    Ok(SwitchingKey {
        b,
        a,
        seeds,
        role,
        fingerprint: ctx.fingerprint(),
    })
}

/// Reads a switching key's role; a Galois element must be odd, below `2N` and agree with the
/// stored rotation `±5^step`.
fn read_role<W: Word>(r: &mut Reader<'_>, ctx: &Context<W>, name: &str) -> Result<KeyRole> {
    match r.u8("key role")? {
        0 => Ok(KeyRole::Generic),
        1 => Ok(KeyRole::Relinearization),
        2 => {
            let g = r.u64("Galois element")?;
            let step = r.u32("rotation step")?;
            let conj = r.u8("conjugation flag")?;
            let n = ctx.n();
            let two_n = 2 * n as u64;
            if g % 2 == 0 || g >= two_n {
                return Err(format_err(format!(
                    "{name} is for Galois element {g}, but elements must be odd and below 2N = {two_n}: corrupted data"
                )));
            }
            if step as usize >= (n / 2).max(1) || conj > 1 {
                return Err(format_err(format!(
                    "{name} stores rotation step {step} and conjugation flag {conj}: steps are below N/2 = {} and the flag is 0 or 1; corrupted data",
                    n / 2
                )));
            }
            let e = galois_element_for_step(n, i64::from(step));
            let expected = if conj == 1 { two_n - e } else { e };
            if expected != g {
                return Err(format_err(format!(
                    "{name} is for Galois element {g}, but its stored rotation (step {step}{}) has element {expected}: corrupted data",
                    if conj == 1 { ", conjugated" } else { "" }
                )));
            }
            Ok(KeyRole::Galois(g))
        }
        c => Err(format_err(format!(
            "{name} has role {c}: roles are 0 (generic), 1 (relinearization) and 2 (Galois); corrupted data"
        ))),
    }
}

/// Smallest number of payload bytes a switching key can take (for count checks).
fn min_switching_key_len<W: Word>(ctx: &Context<W>) -> usize {
    let limbs = ctx.full_basis().len();
    3 + ctx.params().dnum() * (SEED_LEN + 2 + limbs + limbs * packed_len(ctx.n(), 1))
}

/// Reads a count (1..=[`MAX_PRIMES`]) and that many `u64` primes.
fn read_primes(r: &mut Reader<'_>, what: &str) -> Result<Vec<u64>> {
    let count = r.u16(what)?;
    if count == 0 || count > MAX_PRIMES {
        return Err(format_err(format!(
            "{count} {what}: between 1 and {MAX_PRIMES} are allowed; corrupted data"
        )));
    }
    let raw = r.take(count * 8, what)?;
    Ok(raw
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect())
}

fn wrap_params_error(e: CkksError) -> CkksError {
    format_err(format!(
        "the stored parameters are rejected ({e}); the data is corrupted or was written by an incompatible build"
    ))
}

/// The secret distribution as stored: tag and weight.
fn secret_code(d: SecretDistribution) -> (u8, usize) {
    match d {
        SecretDistribution::Ternary => (0, 0),
        SecretDistribution::FixedHamming(h) => (1, h),
    }
}

fn read_secret_distribution(r: &mut Reader<'_>) -> Result<SecretDistribution> {
    let tag = r.u8("secret distribution")?;
    let weight = r.u32("secret Hamming weight")? as usize;
    match (tag, weight) {
        (0, 0) => Ok(SecretDistribution::Ternary),
        (1, h) => Ok(SecretDistribution::FixedHamming(h)),
        _ => Err(format_err(format!(
            "secret distribution {tag} with weight {weight} is unknown (0 = ternary with weight 0, 1 = fixed Hamming weight): corrupted data"
        ))),
    }
}

// ----- the objects -----

impl CkksParameters {
    /// Serializes the parameter set (ring degree, word size, primes, dnum, default scale,
    /// security level, secret distribution). The SIMD backend is not stored: the loader picks
    /// the fastest one of its own CPU.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = begin(
            ObjectKind::Parameters,
            self.word_bits(),
            self.fingerprint(),
            &[],
            32 + 8 * (self.moduli().len() + self.special_moduli().len()),
        );
        put_u32(&mut out, self.n());
        put_u16(&mut out, self.moduli().len());
        for &q in self.moduli() {
            out.extend_from_slice(&q.to_le_bytes());
        }
        put_u16(&mut out, self.special_moduli().len());
        for &p in self.special_moduli() {
            out.extend_from_slice(&p.to_le_bytes());
        }
        put_u16(&mut out, self.dnum());
        out.extend_from_slice(&self.scale().to_le_bytes());
        put_u16(&mut out, self.security().bits() as usize);
        let (tag, h) = secret_code(self.secret_distribution());
        out.push(tag);
        put_u32(&mut out, h);
        end(out)
    }

    /// Loads parameters written by [`CkksParameters::to_bytes`], rebuilding them through
    /// [`CkksParameters::from_primes`] (which re-checks the primes and the security level) and
    /// checking the result against the header's fingerprints.
    pub fn from_bytes(bytes: &[u8]) -> Result<CkksParameters> {
        let (h, r) = read_header(bytes)?;
        Self::parse(&h, r)
    }

    fn parse(h: &Header, mut r: Reader<'_>) -> Result<CkksParameters> {
        check_kind(h, ObjectKind::Parameters)?;
        let n = r.u32("ring degree")? as usize;
        let moduli = read_primes(&mut r, "ciphertext primes")?;
        let special = read_primes(&mut r, "special primes")?;
        let dnum = r.u16("dnum")?;
        let scale = read_scale(&mut r, f64::INFINITY)?;
        let sec_bits = r.u16("security level")?;
        let security = SecurityLevel::from_bits(sec_bits as u32).ok_or_else(|| {
            format_err(format!(
                "security level {sec_bits} bits is unknown (0 = none, 128, 192, 256): corrupted data"
            ))
        })?;
        let secret = read_secret_distribution(&mut r)?;
        r.finish()?;
        let p = CkksParameters::from_primes(
            n,
            h.info.word_bits,
            moduli,
            special,
            dnum,
            scale,
            security,
            secret,
        )
        .map_err(wrap_params_error)?;
        let fingerprint = if h.version == 1 {
            p.fingerprint_v1()
        } else {
            p.fingerprint()
        };
        if fingerprint != h.info.params_fingerprint {
            return Err(format_err(format!(
                "the header fingerprint {:016x} does not match the stored parameters (fingerprint {fingerprint:016x}): corrupted data",
                h.info.params_fingerprint,
            )));
        }
        check_object_fingerprint(
            h,
            object_fingerprint(p.fingerprint(), ObjectKind::Parameters, p.word_bits(), &[]),
        )?;
        Ok(p)
    }
}

impl<W: Word> Ciphertext<W> {
    fn descriptor(&self) -> [u64; 4] {
        [
            self.level as u64,
            self.polys.len() as u64,
            self.slots as u64,
            self.scale.to_bits(),
        ]
    }

    /// Serializes the ciphertext. A fresh symmetric ciphertext (seeded, two polynomials)
    /// stores `c_1` as its 32-byte seed: about half the size.
    pub fn to_bytes(&self) -> Vec<u8> {
        let seeded = match self.seed {
            Some(s) if self.polys.len() == 2 => Some(s),
            _ => None,
        };
        let stored = if seeded.is_some() {
            1
        } else {
            self.polys.len()
        };
        let hint = 16 + SEED_LEN + self.polys.iter().map(poly_len_hint).sum::<usize>();
        let mut out = begin(
            ObjectKind::Ciphertext,
            W::BITS,
            self.fingerprint,
            &self.descriptor(),
            hint,
        );
        put_u16(&mut out, self.level);
        out.push(self.polys.len() as u8);
        out.push(self.polys.first().map_or(1, |p| form_code(p.form())));
        out.push(u8::from(seeded.is_some()));
        put_u32(&mut out, self.slots);
        out.extend_from_slice(&self.scale.to_le_bytes());
        if let Some(s) = seeded {
            out.extend_from_slice(&s);
        }
        for p in &self.polys[..stored] {
            put_poly(&mut out, p);
        }
        end(out)
    }

    /// Loads a ciphertext written by [`Ciphertext::to_bytes`] for `ctx`'s parameters,
    /// re-expanding a seeded `c_1`.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        load(ctx, bytes, ObjectKind::Ciphertext, Self::parse)
    }

    fn parse(ctx: &Context<W>, h: &Header, mut r: Reader<'_>) -> Result<Self> {
        let level = read_level(&mut r, ctx)?;
        let size = usize::from(r.u8("size")?);
        if !(2..=3).contains(&size) {
            return Err(format_err(format!(
                "ciphertext with {size} polynomials: 2 or 3 (before relinearization) are valid; corrupted data"
            )));
        }
        let form = read_form(&mut r)?;
        let seeded = match r.u8("flags")? {
            0 => false,
            1 => true,
            f => {
                return Err(format_err(format!(
                    "ciphertext flags {f:#04x} are unknown (bit 0 = seeded, the rest must be 0): corrupted data"
                )))
            }
        };
        if seeded && size != 2 {
            return Err(format_err(format!(
                "a seeded ciphertext must have 2 polynomials, this one has {size}: corrupted data"
            )));
        }
        let slots = read_slots(&mut r, ctx)?;
        let basis = ctx.q_basis(level)?;
        let scale = read_scale(&mut r, log_modulus(basis))?;
        let seed = if seeded { Some(r.seed("seed")?) } else { None };
        let meaning = format!("level {level} has {} primes", level + 1);
        let stored = if seeded { 1 } else { size };
        let mut polys = Vec::with_capacity(size);
        for i in 0..stored {
            let what = format!("ciphertext polynomial {i}");
            polys.push(read_poly(&mut r, basis, form, &what, &meaning)?);
        }
        r.finish()?;
        if let Some(s) = &seed {
            polys.push(uniform_poly(s, basis)?);
        }
        let ct = Ciphertext {
            polys,
            level,
            scale,
            slots,
            fingerprint: ctx.fingerprint(),
            seed,
        };
        check_object_fingerprint(
            h,
            object_fingerprint(
                ctx.fingerprint(),
                ObjectKind::Ciphertext,
                W::BITS,
                &ct.descriptor(),
            ),
        )?;
        Ok(ct)
    }
}

impl<W: Word> Plaintext<W> {
    fn descriptor(&self) -> [u64; 3] {
        [self.level as u64, self.slots as u64, self.scale.to_bits()]
    }

    /// Serializes the plaintext.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = 16 + poly_len_hint(&self.poly);
        let mut out = begin(
            ObjectKind::Plaintext,
            W::BITS,
            self.fingerprint,
            &self.descriptor(),
            hint,
        );
        put_u16(&mut out, self.level);
        out.push(form_code(self.poly.form()));
        put_u32(&mut out, self.slots);
        out.extend_from_slice(&self.scale.to_le_bytes());
        put_poly(&mut out, &self.poly);
        end(out)
    }

    /// Loads a plaintext written by [`Plaintext::to_bytes`] for `ctx`'s parameters.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        load(ctx, bytes, ObjectKind::Plaintext, Self::parse)
    }

    fn parse(ctx: &Context<W>, h: &Header, mut r: Reader<'_>) -> Result<Self> {
        let level = read_level(&mut r, ctx)?;
        let form = read_form(&mut r)?;
        let slots = read_slots(&mut r, ctx)?;
        let basis = ctx.q_basis(level)?;
        let scale = read_scale(&mut r, log_modulus(basis))?;
        let meaning = format!("level {level} has {} primes", level + 1);
        let poly = read_poly(&mut r, basis, form, "plaintext polynomial", &meaning)?;
        r.finish()?;
        let pt = Plaintext {
            poly,
            level,
            scale,
            slots,
            fingerprint: ctx.fingerprint(),
        };
        check_object_fingerprint(
            h,
            object_fingerprint(
                ctx.fingerprint(),
                ObjectKind::Plaintext,
                W::BITS,
                &pt.descriptor(),
            ),
        )?;
        Ok(pt)
    }
}

impl<W: Word> PublicKey<W> {
    /// Serializes the public key as `b` and the seed of `a`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = SEED_LEN + poly_len_hint(&self.b);
        let mut out = begin(ObjectKind::PublicKey, W::BITS, self.fingerprint, &[], hint);
        out.extend_from_slice(&self.seed);
        put_poly(&mut out, &self.b);
        end(out)
    }

    /// Loads a public key written by [`PublicKey::to_bytes`] for `ctx`'s parameters,
    /// re-expanding `a` from its seed.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        load(ctx, bytes, ObjectKind::PublicKey, Self::parse)
    }

    fn parse(ctx: &Context<W>, h: &Header, mut r: Reader<'_>) -> Result<Self> {
        let seed = r.seed("seed")?;
        let basis = ctx.qp_basis(ctx.max_level())?;
        let meaning = format!(
            "{} ciphertext primes and {} special primes",
            ctx.max_level() + 1,
            ctx.params().alpha()
        );
        let b = read_poly(
            &mut r,
            basis,
            Form::Ntt,
            "public key polynomial b",
            &meaning,
        )?;
        r.finish()?;
        check_object_fingerprint(
            h,
            object_fingerprint(ctx.fingerprint(), ObjectKind::PublicKey, W::BITS, &[]),
        )?;
        let a = uniform_poly(&seed, basis)?;
        Ok(PublicKey {
            b,
            a,
            seed,
            fingerprint: ctx.fingerprint(),
        })
    }
}

impl<W: Word> SecretKey<W> {
    /// Serializes the secret key for the client's own storage: its `N` ternary coefficients at
    /// 2 bits each. Keep these bytes on the client (every loader of a public object refuses
    /// them).
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.coeffs.len();
        let mut out = begin(
            ObjectKind::SecretKey,
            W::BITS,
            self.fingerprint,
            &[],
            5 + n.div_ceil(4),
        );
        // The distribution is part of the parameters (and their fingerprint); it is repeated
        // here so that the weight can be checked from the key alone.
        let weight = self.coeffs.iter().filter(|&&c| c != 0).count();
        out.push(0);
        put_u32(&mut out, weight);
        for chunk in self.coeffs.chunks(4) {
            let mut byte = 0u8;
            for (i, &c) in chunk.iter().enumerate() {
                let code = match c {
                    1 => 1u8,
                    -1 => 2,
                    _ => 0,
                };
                byte |= code << (2 * i);
            }
            out.push(byte);
        }
        end(out)
    }

    /// Loads a secret key written by [`SecretKey::to_bytes`] for `ctx`'s parameters: every
    /// coefficient must be -1, 0 or 1, their number of non-zeros must match the stored weight
    /// and, for a fixed-weight distribution, the parameters' weight.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        let (h, mut r) = expect_header(ctx, bytes, ObjectKind::SecretKey)?;
        let tag = r.u8("reserved")?;
        if tag != 0 {
            return Err(format_err(format!(
                "secret key reserved byte {tag}: it must be 0; corrupted data"
            )));
        }
        let weight = r.u32("Hamming weight")? as usize;
        let n = ctx.n();
        let packed = r.take(n.div_ceil(4), "coefficients")?;
        r.finish()?;
        let mut coeffs = Vec::with_capacity(n);
        for (i, &byte) in packed.iter().enumerate() {
            for j in 0..4 {
                if 4 * i + j >= n {
                    if byte >> (2 * j) != 0 {
                        return Err(format_err(
                            "secret key padding bits are not zero: corrupted data".into(),
                        ));
                    }
                    break;
                }
                coeffs.push(match (byte >> (2 * j)) & 3 {
                    0 => 0i64,
                    1 => 1,
                    2 => -1,
                    _ => {
                        return Err(format_err(format!(
                            "secret key coefficient {} has code 3: codes are 0 (0), 1 (+1) and 2 (-1); corrupted data",
                            4 * i + j
                        )))
                    }
                });
            }
        }
        let nonzero = coeffs.iter().filter(|&&c| c != 0).count();
        if nonzero != weight {
            return Err(format_err(format!(
                "secret key with {nonzero} non-zero coefficients but a stored weight of {weight}: corrupted data"
            )));
        }
        if let SecretDistribution::FixedHamming(want) = ctx.params().secret_distribution() {
            if weight != want {
                return Err(format_err(format!(
                    "secret key of Hamming weight {weight}, but these parameters fix the weight at {want}: corrupted data or another key"
                )));
            }
        }
        check_object_fingerprint(
            &h,
            object_fingerprint(ctx.fingerprint(), ObjectKind::SecretKey, W::BITS, &[]),
        )?;
        SecretKey::from_coefficients(ctx, &coeffs)
    }
}

impl<W: Word> SwitchingKey<W> {
    /// Serializes the switching key as its role and, per digit, `b_j` and the seed of `a_j`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = switching_key_hint(self);
        let mut out = begin(
            ObjectKind::SwitchingKey,
            W::BITS,
            self.fingerprint,
            &role_words(self.role),
            hint,
        );
        put_switching_key(&mut out, self, self.b.first().map_or(0, RnsPoly::n));
        end(out)
    }

    /// Loads a switching key written by [`SwitchingKey::to_bytes`] for `ctx`'s parameters,
    /// re-expanding every `a_j` from its seed.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        load(ctx, bytes, ObjectKind::SwitchingKey, Self::parse)
    }

    fn parse(ctx: &Context<W>, h: &Header, mut r: Reader<'_>) -> Result<Self> {
        let k = read_switching_key(&mut r, ctx, h.version, "switching key")?;
        r.finish()?;
        check_object_fingerprint(
            h,
            object_fingerprint(
                ctx.fingerprint(),
                ObjectKind::SwitchingKey,
                W::BITS,
                &role_words(k.role),
            ),
        )?;
        Ok(k)
    }
}

impl<W: Word> EvaluationKeys<W> {
    fn descriptor(&self) -> Vec<u64> {
        let mut d = vec![u64::from(self.relin.is_some()), self.galois.len() as u64];
        d.extend(self.galois.keys());
        d
    }

    /// Serializes the relinearization key (if any) and every Galois key, by increasing
    /// Galois element.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = 8
            + self.relin.as_ref().map_or(0, switching_key_hint)
            + self.galois.values().map(switching_key_hint).sum::<usize>();
        let mut out = begin(
            ObjectKind::EvaluationKeys,
            W::BITS,
            self.fingerprint,
            &self.descriptor(),
            hint,
        );
        out.push(u8::from(self.relin.is_some()));
        put_u32(&mut out, self.galois.len());
        let n = self
            .relin
            .iter()
            .chain(self.galois.values())
            .find_map(|k| k.b.first().map(RnsPoly::n))
            .unwrap_or(0);
        if let Some(k) = &self.relin {
            put_switching_key(&mut out, k, n);
        }
        for k in self.galois.values() {
            put_switching_key(&mut out, k, n);
        }
        end(out)
    }

    /// Loads evaluation keys written by [`EvaluationKeys::to_bytes`] for `ctx`'s parameters.
    /// The relinearization key must have that role, Galois keys theirs, with elements odd,
    /// below `2N` and strictly increasing.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        load(ctx, bytes, ObjectKind::EvaluationKeys, Self::parse)
    }

    fn parse(ctx: &Context<W>, h: &Header, mut r: Reader<'_>) -> Result<Self> {
        let v1 = h.version == 1;
        let has_relin = match r.u8("flags")? {
            0 => false,
            1 => true,
            f => {
                return Err(format_err(format!(
                    "evaluation key flags {f:#04x} are unknown (bit 0 = relinearization key present, the rest must be 0): corrupted data"
                )))
            }
        };
        let count = r.u32("Galois key count")? as usize;
        let n = ctx.n();
        let two_n = 2 * n as u64;
        let min_len = min_switching_key_len(ctx);
        let needed = count
            .saturating_mul(min_len + 8)
            .saturating_add(usize::from(has_relin) * min_len);
        if count > n || needed > r.remaining() + 8 * count {
            return Err(format_err(format!(
                "the evaluation keys declare {count} Galois keys, but at most {n} exist for N = {n} and the {} remaining bytes hold fewer: corrupted count",
                r.remaining()
            )));
        }
        let relin = if has_relin {
            let k = read_switching_key(&mut r, ctx, h.version, "relinearization key")?;
            match k.role {
                KeyRole::Relinearization => {}
                KeyRole::Generic if v1 => {}
                other => {
                    return Err(format_err(format!(
                    "the relinearization key slot holds a key with role {other:?}: corrupted data"
                )))
                }
            }
            Some(SwitchingKey {
                role: KeyRole::Relinearization,
                ..k
            })
        } else {
            None
        };
        let mut galois = BTreeMap::new();
        let mut last: Option<u64> = None;
        for i in 0..count {
            let name = format!("Galois key {i}");
            let (g, key) = if v1 {
                let g = r.u64("Galois element")?;
                if g % 2 == 0 || g >= two_n {
                    return Err(format_err(format!(
                        "Galois key {i} is for element {g}, but elements must be odd and below 2N = {two_n}: corrupted data"
                    )));
                }
                let k = read_switching_key(&mut r, ctx, 1, &name)?;
                (
                    g,
                    SwitchingKey {
                        role: KeyRole::Galois(g),
                        ..k
                    },
                )
            } else {
                let k = read_switching_key(&mut r, ctx, 2, &name)?;
                match k.role {
                    KeyRole::Galois(g) => (g, k),
                    other => {
                        return Err(format_err(format!(
                            "Galois key {i} has role {other:?}: corrupted data"
                        )))
                    }
                }
            };
            if let Some(prev) = last {
                if g <= prev {
                    return Err(format_err(format!(
                        "Galois key {i} (element {g}) does not follow element {prev}: elements are stored strictly increasing, so this is a duplicate or corrupted data"
                    )));
                }
            }
            last = Some(g);
            galois.insert(g, key);
        }
        r.finish()?;
        let keys = EvaluationKeys {
            relin,
            galois,
            fingerprint: ctx.fingerprint(),
        };
        check_object_fingerprint(
            h,
            object_fingerprint(
                ctx.fingerprint(),
                ObjectKind::EvaluationKeys,
                W::BITS,
                &keys.descriptor(),
            ),
        )?;
        Ok(keys)
    }
}

// ----- version 1 -----

/// Converts version-1 parameters to version 2. Every field is re-validated (the primes, the
/// security level, the fingerprint), but version 1 has no checksum: convert only bytes from a
/// source you trust.
pub fn upgrade_v1_params(bytes: &[u8]) -> Result<Vec<u8>> {
    let (h, r) = v1_header(bytes)?;
    Ok(CkksParameters::parse(&h, r)?.to_bytes())
}

/// Converts a version-1 ciphertext, plaintext, public key, switching key or evaluation keys
/// made for `ctx`'s parameters to version 2, re-validating every field as `from_bytes` does
/// (coefficients below their primes, levels, slots, scales, Galois elements). Version 1 has no
/// checksum, so corruption that keeps every field in range cannot be detected: convert only
/// bytes from a source you trust, then keep the version-2 bytes. A version-1 switching key has
/// no role and converts as a generic key.
pub fn upgrade_v1<W: Word>(ctx: &Context<W>, bytes: &[u8]) -> Result<Vec<u8>> {
    let (h, r) = v1_header(bytes)?;
    let kind = h.info.kind;
    if kind == ObjectKind::Parameters {
        let p = CkksParameters::parse(&h, r)?;
        if p.fingerprint() != ctx.fingerprint() {
            return Err(CkksError::ParameterMismatch(
                "these version-1 parameters differ from the context's; convert them with upgrade_v1_params".into(),
            ));
        }
        return Ok(p.to_bytes());
    }
    expect_kind::<W>(&h, kind, ctx.params().fingerprint_v1())?;
    Ok(match kind {
        ObjectKind::Ciphertext => Ciphertext::parse(ctx, &h, r)?.to_bytes(),
        ObjectKind::Plaintext => Plaintext::parse(ctx, &h, r)?.to_bytes(),
        ObjectKind::PublicKey => PublicKey::parse(ctx, &h, r)?.to_bytes(),
        ObjectKind::SwitchingKey => SwitchingKey::parse(ctx, &h, r)?.to_bytes(),
        ObjectKind::EvaluationKeys => EvaluationKeys::parse(ctx, &h, r)?.to_bytes(),
        ObjectKind::Parameters | ObjectKind::SecretKey | ObjectKind::TaskGraph => {
            return Err(format_err(format!(
                "version 1 has no {kind} objects: corrupted data"
            )))
        }
    })
}

/// Parses a version-1 header; version-2 bytes get an error that says they need no upgrade.
fn v1_header(bytes: &[u8]) -> Result<(Header, Reader<'_>)> {
    if check_magic(bytes)? != 1 {
        return Err(format_err(format!(
            "these bytes are already format version {FORMAT_VERSION}: load them with from_bytes, no upgrade is needed"
        )));
    }
    parse_header(bytes, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `unpack` inverts `pack` at every width and length (fast path, tail and wide path), and
    /// finds the first coefficient out of range.
    #[test]
    fn pack_unpack_every_width() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for w in 1..=64u32 {
            let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
            for n in [1usize, 2, 7, 8, 9, 63, 64, 65, 200] {
                let vals: Vec<u64> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x & mask
                    })
                    .collect();
                let mut bytes = Vec::new();
                pack(&mut bytes, &vals, w);
                assert_eq!(bytes.len(), packed_len(n, w));
                let mut out = vec![0u64; n];
                assert_eq!(unpack(&bytes, w, u64::MAX, &mut out), Ok(()), "w {w} n {n}");
                assert_eq!(out, vals, "w {w} n {n}");
                let q = vals[n - 1];
                let first = vals.iter().position(|&v| v >= q);
                assert_eq!(
                    unpack(&bytes, w, q, &mut out).err(),
                    first.map(|j| (j, vals[j])),
                    "w {w} n {n}"
                );
                assert!(unpack(&bytes[..bytes.len() - 1], w, u64::MAX, &mut out).is_err());
            }
        }
    }
}
