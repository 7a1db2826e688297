//! A versioned, checked binary format for parameters, public keys, switching keys, evaluation
//! keys, ciphertexts and plaintexts. Secret keys have no serialization: they never leave the
//! client.
//!
//! Everything is little-endian and written by hand (no serde). Every object starts with a
//! 24-byte header:
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | magic `"HELM"` ([`MAGIC`])                                   |
//! | 4      | 2    | format version ([`FORMAT_VERSION`])                          |
//! | 6      | 1    | object kind ([`ObjectKind`], 1..=6)                          |
//! | 7      | 1    | word size in bits (32 or 64)                                 |
//! | 8      | 8    | parameter fingerprint ([`CkksParameters::fingerprint`])      |
//! | 16     | 8    | payload length in bytes (exactly what follows the header)    |
//!
//! Payloads (`poly` is a packed polynomial, below; `seed` is 32 bytes):
//!
//! | kind            | payload                                                                 |
//! |-----------------|-------------------------------------------------------------------------|
//! | Parameters      | `n u32, #q u16, q u64.., #p u16, p u64.., dnum u16, scale f64, security u16 (0/128/192/256), secret u8 (0 ternary, 1 fixed weight), weight u32` |
//! | Ciphertext      | `level u16, size u8 (2..=3), form u8 (1 = NTT, the only form read), flags u8 (bit 0 seeded), slots u32, scale f64, [seed], poly x (size, or 1 when seeded)` |
//! | Plaintext       | `level u16, form u8, slots u32, scale f64, poly`                        |
//! | PublicKey       | `seed, poly` (`b` over `q_0..q_L, P`; `a` is expanded from the seed)    |
//! | SwitchingKey    | `dnum u16, (seed, poly) x dnum` (over `q_0..q_L, P`)                    |
//! | EvaluationKeys  | `flags u8 (bit 0 relin), count u32, [switching key payload], (g u64, switching key payload) x count`, Galois elements strictly increasing |
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
//! Errors: bytes that are not a valid object give [`CkksError::Format`]; valid bytes made for
//! another word size or other parameters than the context they are loaded with give
//! [`CkksError::ParameterMismatch`].

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::context::Context;
use crate::error::{CkksError, Result};
use crate::keys::{uniform_poly, EvaluationKeys, PublicKey, SwitchingKey};
use crate::params::{CkksParameters, SecretDistribution};
use crate::security::SecurityLevel;
use heloom_math::sampler::Seed;
use heloom_math::{Form, RnsBasis, RnsPoly, Word};
use std::collections::BTreeMap;
use std::fmt;

/// Version of the format written by this build (the only one it reads).
pub const FORMAT_VERSION: u16 = 1;

/// The four bytes every heloom object starts with.
pub const MAGIC: [u8; 4] = *b"HELM";

/// Size of the header in bytes.
pub const HEADER_LEN: usize = 24;

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
}

impl ObjectKind {
    /// The byte stored in the header.
    pub fn code(self) -> u8 {
        match self {
            ObjectKind::Parameters => 1,
            ObjectKind::Ciphertext => 2,
            ObjectKind::Plaintext => 3,
            ObjectKind::PublicKey => 4,
            ObjectKind::SwitchingKey => 5,
            ObjectKind::EvaluationKeys => 6,
        }
    }

    /// The kind stored as `code`, if any.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(ObjectKind::Parameters),
            2 => Some(ObjectKind::Ciphertext),
            3 => Some(ObjectKind::Plaintext),
            4 => Some(ObjectKind::PublicKey),
            5 => Some(ObjectKind::SwitchingKey),
            6 => Some(ObjectKind::EvaluationKeys),
            _ => None,
        }
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

/// The kind of a serialized object, from its first 7 bytes (magic, version, kind); the rest of
/// the object is not checked.
pub fn peek_kind(bytes: &[u8]) -> Result<ObjectKind> {
    check_magic_version(bytes)?;
    kind_of(bytes[6])
}

fn check_magic_version(bytes: &[u8]) -> Result<()> {
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
    if version != FORMAT_VERSION {
        return Err(format_err(format!(
            "format version {version} is not supported: this build reads version {FORMAT_VERSION} only; write the object again with a matching heloom version"
        )));
    }
    Ok(())
}

fn kind_of(code: u8) -> Result<ObjectKind> {
    ObjectKind::from_code(code).ok_or_else(|| {
        format_err(format!(
            "unknown object kind {code}: kinds 1..=6 (parameters, ciphertext, plaintext, public key, switching key, evaluation keys) exist; corrupted data or a newer format"
        ))
    })
}

/// A checked header.
struct Header {
    kind: ObjectKind,
    word_bits: u32,
    fingerprint: u64,
}

/// Checks the header and returns it with a reader over the payload (whose length matches).
fn read_header(bytes: &[u8]) -> Result<(Header, Reader<'_>)> {
    check_magic_version(bytes)?;
    if bytes.len() < HEADER_LEN {
        return Err(format_err(format!(
            "truncated heloom object: only {} bytes, the header alone has {HEADER_LEN}",
            bytes.len()
        )));
    }
    let kind = kind_of(bytes[6])?;
    let word_bits = u32::from(bytes[7]);
    if word_bits != 32 && word_bits != 64 {
        return Err(format_err(format!(
            "word size {word_bits} bits in the header: only 32 and 64 exist; corrupted data"
        )));
    }
    let mut r = Reader::new(&bytes[8..HEADER_LEN], 8, "header");
    let fingerprint = r.u64("fingerprint")?;
    let len = r.u64("payload length")?;
    let rest = bytes.len() - HEADER_LEN;
    if len > MAX_PAYLOAD_BYTES {
        return Err(format_err(format!(
            "the header declares a payload of {len} bytes, above the {MAX_PAYLOAD_BYTES}-byte limit: corrupted length"
        )));
    }
    if len > rest as u64 {
        return Err(format_err(format!(
            "truncated {kind}: the header declares {len} payload bytes but only {rest} follow; the data was cut short"
        )));
    }
    if len < rest as u64 {
        return Err(format_err(format!(
            "{} trailing bytes after the {len}-byte payload of this {kind}: pass exactly one object",
            rest as u64 - len
        )));
    }
    Ok((
        Header {
            kind,
            word_bits,
            fingerprint,
        },
        Reader::new(&bytes[HEADER_LEN..], HEADER_LEN, kind.name()),
    ))
}

/// Checks the header of an object of `kind` to be loaded into `ctx`.
fn expect_header<'a, W: Word>(
    ctx: &Context<W>,
    bytes: &'a [u8],
    kind: ObjectKind,
) -> Result<Reader<'a>> {
    let (h, r) = read_header(bytes)?;
    if h.kind != kind {
        return Err(format_err(format!(
            "these bytes hold a {}, not a {kind}; load them with {}::from_bytes",
            h.kind, h.kind
        )));
    }
    if h.word_bits != W::BITS {
        return Err(CkksError::ParameterMismatch(format!(
            "this {kind} was made for {}-bit words but is being loaded as {kind}<u{}>; load it with a Context<u{}>",
            h.word_bits,
            W::BITS,
            h.word_bits
        )));
    }
    if h.fingerprint != ctx.fingerprint() {
        return Err(CkksError::ParameterMismatch(format!(
            "this {kind} was made for other parameters (fingerprint {:016x}, context {:016x}); load it with the context it was created with",
            h.fingerprint,
            ctx.fingerprint()
        )));
    }
    Ok(r)
}

// ----- writing -----

/// Starts an object: the header with a zero payload length (patched by [`end`]).
fn begin(kind: ObjectKind, word_bits: u32, fingerprint: u64, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + capacity);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(kind.code());
    out.push(word_bits as u8);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out
}

/// Patches the payload length into the header.
fn end(mut out: Vec<u8>) -> Vec<u8> {
    let len = (out.len() - HEADER_LEN) as u64;
    out[16..HEADER_LEN].copy_from_slice(&len.to_le_bytes());
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
    out.reserve(packed_len(limb.len(), w));
    let mut acc: u128 = 0;
    let mut nbits = 0u32;
    for &v in limb {
        acc |= u128::from(v.to_u64()) << nbits;
        nbits += w;
        if nbits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            nbits -= 64;
        }
    }
    let tail = nbits.div_ceil(8) as usize;
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..tail]);
}

fn put_switching_key<W: Word>(out: &mut Vec<u8>, k: &SwitchingKey<W>) {
    put_u16(out, k.b.len());
    for (b, seed) in k.b.iter().zip(&k.seeds) {
        out.extend_from_slice(seed);
        put_poly(out, b);
    }
}

fn switching_key_hint<W: Word>(k: &SwitchingKey<W>) -> usize {
    2 + k
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

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(format_err(format!(
                "truncated {}: {field} needs {n} bytes at offset {} but only {} remain; the data was cut short or a length in it is corrupted",
                self.what,
                self.base + self.pos,
                self.remaining()
            )));
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

fn read_scale(r: &mut Reader<'_>) -> Result<f64> {
    let scale = r.f64("scale")?;
    if !(scale.is_finite() && scale >= 1.0) {
        return Err(format_err(format!(
            "{} with scale {scale}: a scale must be a finite number >= 1; corrupted data",
            r.what
        )));
    }
    Ok(scale)
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
        return Err(format_err(format!(
            "truncated {}: {what} needs {total} bytes of coefficients at offset {} but only {} remain",
            r.what,
            r.base + r.pos,
            r.remaining()
        )));
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
fn unpack<W: Word>(
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

/// Reads the payload of a switching key (over the full basis).
fn read_switching_key<W: Word>(
    r: &mut Reader<'_>,
    ctx: &Context<W>,
    name: &str,
) -> Result<SwitchingKey<W>> {
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
        fingerprint: ctx.fingerprint(),
    })
}

/// Smallest number of payload bytes a switching key can take (for count checks).
fn min_switching_key_len<W: Word>(ctx: &Context<W>) -> usize {
    let limbs = ctx.full_basis().len();
    2 + ctx.params().dnum() * (SEED_LEN + 2 + limbs + limbs * packed_len(ctx.n(), 1))
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
        let (tag, h) = match self.secret_distribution() {
            SecretDistribution::Ternary => (0u8, 0usize),
            SecretDistribution::FixedHamming(h) => (1u8, h),
        };
        out.push(tag);
        put_u32(&mut out, h);
        end(out)
    }

    /// Loads parameters written by [`CkksParameters::to_bytes`], rebuilding them through
    /// [`CkksParameters::from_primes`] (which re-checks the primes and the security level) and
    /// checking the result against the header's fingerprint.
    pub fn from_bytes(bytes: &[u8]) -> Result<CkksParameters> {
        let (h, mut r) = read_header(bytes)?;
        if h.kind != ObjectKind::Parameters {
            return Err(format_err(format!(
                "these bytes hold a {}, not a CkksParameters; load them with {}::from_bytes",
                h.kind, h.kind
            )));
        }
        let n = r.u32("ring degree")? as usize;
        let moduli = read_primes(&mut r, "ciphertext primes")?;
        let special = read_primes(&mut r, "special primes")?;
        let dnum = r.u16("dnum")?;
        let scale = read_scale(&mut r)?;
        let sec_bits = r.u16("security level")?;
        let security = SecurityLevel::from_bits(sec_bits as u32).ok_or_else(|| {
            format_err(format!(
                "security level {sec_bits} bits is unknown (0 = none, 128, 192, 256): corrupted data"
            ))
        })?;
        let tag = r.u8("secret distribution")?;
        let weight = r.u32("secret Hamming weight")? as usize;
        let secret = match (tag, weight) {
            (0, 0) => SecretDistribution::Ternary,
            (1, h) => SecretDistribution::FixedHamming(h),
            _ => {
                return Err(format_err(format!(
                    "secret distribution {tag} with weight {weight} is unknown (0 = ternary with weight 0, 1 = fixed Hamming weight): corrupted data"
                )))
            }
        };
        r.finish()?;
        let p = CkksParameters::from_primes(
            n,
            h.word_bits,
            moduli,
            special,
            dnum,
            scale,
            security,
            secret,
        )
        .map_err(wrap_params_error)?;
        if p.fingerprint() != h.fingerprint {
            return Err(format_err(format!(
                "the header fingerprint {:016x} does not match the stored primes (fingerprint {:016x}): corrupted data",
                h.fingerprint,
                p.fingerprint()
            )));
        }
        Ok(p)
    }
}

impl<W: Word> Ciphertext<W> {
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
        let mut out = begin(ObjectKind::Ciphertext, W::BITS, self.fingerprint, hint);
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
        let mut r = expect_header(ctx, bytes, ObjectKind::Ciphertext)?;
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
        let scale = read_scale(&mut r)?;
        let seed = if seeded { Some(r.seed("seed")?) } else { None };
        let basis = ctx.q_basis(level)?;
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
        Ok(Ciphertext {
            polys,
            level,
            scale,
            slots,
            fingerprint: ctx.fingerprint(),
            seed,
        })
    }
}

impl<W: Word> Plaintext<W> {
    /// Serializes the plaintext.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = 16 + poly_len_hint(&self.poly);
        let mut out = begin(ObjectKind::Plaintext, W::BITS, self.fingerprint, hint);
        put_u16(&mut out, self.level);
        out.push(form_code(self.poly.form()));
        put_u32(&mut out, self.slots);
        out.extend_from_slice(&self.scale.to_le_bytes());
        put_poly(&mut out, &self.poly);
        end(out)
    }

    /// Loads a plaintext written by [`Plaintext::to_bytes`] for `ctx`'s parameters.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        let mut r = expect_header(ctx, bytes, ObjectKind::Plaintext)?;
        let level = read_level(&mut r, ctx)?;
        let form = read_form(&mut r)?;
        let slots = read_slots(&mut r, ctx)?;
        let scale = read_scale(&mut r)?;
        let basis = ctx.q_basis(level)?;
        let meaning = format!("level {level} has {} primes", level + 1);
        let poly = read_poly(&mut r, basis, form, "plaintext polynomial", &meaning)?;
        r.finish()?;
        Ok(Plaintext {
            poly,
            level,
            scale,
            slots,
            fingerprint: ctx.fingerprint(),
        })
    }
}

impl<W: Word> PublicKey<W> {
    /// Serializes the public key as `b` and the seed of `a`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = SEED_LEN + poly_len_hint(&self.b);
        let mut out = begin(ObjectKind::PublicKey, W::BITS, self.fingerprint, hint);
        out.extend_from_slice(&self.seed);
        put_poly(&mut out, &self.b);
        end(out)
    }

    /// Loads a public key written by [`PublicKey::to_bytes`] for `ctx`'s parameters,
    /// re-expanding `a` from its seed.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        let mut r = expect_header(ctx, bytes, ObjectKind::PublicKey)?;
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
        let a = uniform_poly(&seed, basis)?;
        Ok(PublicKey {
            b,
            a,
            seed,
            fingerprint: ctx.fingerprint(),
        })
    }
}

impl<W: Word> SwitchingKey<W> {
    /// Serializes the switching key as, per digit, `b_j` and the seed of `a_j`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = switching_key_hint(self);
        let mut out = begin(ObjectKind::SwitchingKey, W::BITS, self.fingerprint, hint);
        put_switching_key(&mut out, self);
        end(out)
    }

    /// Loads a switching key written by [`SwitchingKey::to_bytes`] for `ctx`'s parameters,
    /// re-expanding every `a_j` from its seed.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        let mut r = expect_header(ctx, bytes, ObjectKind::SwitchingKey)?;
        let k = read_switching_key(&mut r, ctx, "switching key")?;
        r.finish()?;
        Ok(k)
    }
}

impl<W: Word> EvaluationKeys<W> {
    /// Serializes the relinearization key (if any) and every Galois key, by increasing
    /// Galois element.
    pub fn to_bytes(&self) -> Vec<u8> {
        let hint = 8
            + self.relin.as_ref().map_or(0, switching_key_hint)
            + self
                .galois
                .values()
                .map(|k| 8 + switching_key_hint(k))
                .sum::<usize>();
        let mut out = begin(ObjectKind::EvaluationKeys, W::BITS, self.fingerprint, hint);
        out.push(u8::from(self.relin.is_some()));
        put_u32(&mut out, self.galois.len());
        if let Some(k) = &self.relin {
            put_switching_key(&mut out, k);
        }
        for (&g, k) in &self.galois {
            out.extend_from_slice(&g.to_le_bytes());
            put_switching_key(&mut out, k);
        }
        end(out)
    }

    /// Loads evaluation keys written by [`EvaluationKeys::to_bytes`] for `ctx`'s parameters.
    /// Galois elements must be odd, below `2N` and strictly increasing.
    pub fn from_bytes(ctx: &Context<W>, bytes: &[u8]) -> Result<Self> {
        let mut r = expect_header(ctx, bytes, ObjectKind::EvaluationKeys)?;
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
        if count > n || needed > r.remaining() {
            return Err(format_err(format!(
                "the evaluation keys declare {count} Galois keys, but at most {n} exist for N = {n} and the {} remaining bytes hold fewer: corrupted count",
                r.remaining()
            )));
        }
        let relin = if has_relin {
            Some(read_switching_key(&mut r, ctx, "relinearization key")?)
        } else {
            None
        };
        let mut galois = BTreeMap::new();
        let mut last: Option<u64> = None;
        for i in 0..count {
            let g = r.u64("Galois element")?;
            if g % 2 == 0 || g >= two_n {
                return Err(format_err(format!(
                    "Galois key {i} is for element {g}, but elements must be odd and below 2N = {two_n}: corrupted data"
                )));
            }
            if let Some(prev) = last {
                if g <= prev {
                    return Err(format_err(format!(
                        "Galois key {i} (element {g}) does not follow element {prev}: elements are stored strictly increasing, so this is a duplicate or corrupted data"
                    )));
                }
            }
            last = Some(g);
            let key = read_switching_key(&mut r, ctx, &format!("Galois key {g}"))?;
            galois.insert(g, key);
        }
        r.finish()?;
        Ok(EvaluationKeys {
            relin,
            galois,
            fingerprint: ctx.fingerprint(),
        })
    }
}
