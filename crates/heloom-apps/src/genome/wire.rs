//! Protocol messages and their framed binary encoding.
//!
//! ```text
//! frame   = header payload checksum
//! header  = b"HLGN" version:u8 kind:u8 reserved:u16(0) fingerprint:u64 session:u64 length:u32
//! payload = `length` bytes (fields: u32/u64/f64 little-endian, byte strings as u32 length + bytes)
//! checksum= u64 XXH3-64 (seed 0) of header and payload
//! ```
//!
//! `fingerprint` is the CKKS parameters' fingerprint, `session` the FNV-1a 64 of the client's
//! public key bytes: a message made for other parameters or keys is refused with
//! [`AppError::Protocol`] before anything is deserialized. Every read is bounds-checked.

use crate::error::{AppError, Result};
use xxhash_rust::xxh3::xxh3_64;

/// Frame magic.
pub const MAGIC: &[u8; 4] = b"HLGN";
/// Protocol version (2: the checksum is XXH3-64; version 1 used FNV-1a 64).
pub const VERSION: u8 = 2;
/// Header length in bytes.
pub const HEADER_LEN: usize = 28;
/// Default largest payload accepted (the key upload is the largest message, ~10 MiB).
pub const MAX_PAYLOAD: usize = 64 << 20;

/// How the query is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// One round per query character (Shimizu et al. 2016).
    Interactive,
    /// One round for the whole (short) query: the server tabulates all `2^l` answers.
    NonInteractive,
}

impl Mode {
    fn code(self) -> u32 {
        match self {
            Mode::Interactive => 0,
            Mode::NonInteractive => 1,
        }
    }
    fn from_code(c: u32) -> Result<Self> {
        match c {
            0 => Ok(Mode::Interactive),
            1 => Ok(Mode::NonInteractive),
            _ => Err(AppError::Protocol(format!("unknown mode {c}"))),
        }
    }
}

/// A protocol message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Client to server: parameters, public key, evaluation keys, and the public query shape.
    Hello {
        /// Serialized CKKS parameters.
        params: Vec<u8>,
        /// Serialized public key (for the server's flooding encryptions of zero).
        public_key: Vec<u8>,
        /// Serialized Galois keys (rotations by powers of two, conjugation).
        eval_keys: Vec<u8>,
        /// Interactive or non-interactive.
        mode: Mode,
        /// First site of the query.
        start: u32,
        /// Query length (sites).
        length: u32,
    },
    /// Server to client: panel size and the server's initialisation time.
    HelloAck {
        /// Haplotypes M.
        haplotypes: u32,
        /// Sites S.
        sites: u32,
        /// Server initialisation (keys, tables), seconds.
        init_s: f64,
    },
    /// Client to server: round `round`'s ciphertexts (two interactive, one non-interactive).
    Query {
        /// Round number from 0.
        round: u32,
        /// Serialized ciphertexts.
        cts: Vec<Vec<u8>>,
    },
    /// Server to client: the round's result ciphertexts.
    Reply {
        /// Round number from 0.
        round: u32,
        /// Serialized ciphertexts.
        cts: Vec<Vec<u8>>,
        /// Server time for the round, seconds.
        server_s: f64,
    },
    /// Client to server: the session is over; send statistics.
    Finish,
    /// Server to client: statistics as JSON.
    Stats {
        /// JSON text.
        json: String,
    },
    /// Either way: the peer refused a message.
    Error {
        /// What went wrong.
        message: String,
    },
}

impl Message {
    fn kind(&self) -> u8 {
        match self {
            Message::Hello { .. } => 1,
            Message::HelloAck { .. } => 2,
            Message::Query { .. } => 3,
            Message::Reply { .. } => 4,
            Message::Finish => 5,
            Message::Stats { .. } => 6,
            Message::Error { .. } => 7,
        }
    }

    /// Name of the message kind (for errors).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "Hello",
            Message::HelloAck { .. } => "HelloAck",
            Message::Query { .. } => "Query",
            Message::Reply { .. } => "Reply",
            Message::Finish => "Finish",
            Message::Stats { .. } => "Stats",
            Message::Error { .. } => "Error",
        }
    }

    /// The frame of this message for parameters `fingerprint` and session `session`.
    pub fn encode(&self, fingerprint: u64, session: u64) -> Vec<u8> {
        let mut p = Vec::new();
        match self {
            Message::Hello {
                params,
                public_key,
                eval_keys,
                mode,
                start,
                length,
            } => {
                put_bytes(&mut p, params);
                put_bytes(&mut p, public_key);
                put_bytes(&mut p, eval_keys);
                p.extend_from_slice(&mode.code().to_le_bytes());
                p.extend_from_slice(&start.to_le_bytes());
                p.extend_from_slice(&length.to_le_bytes());
            }
            Message::HelloAck {
                haplotypes,
                sites,
                init_s,
            } => {
                p.extend_from_slice(&haplotypes.to_le_bytes());
                p.extend_from_slice(&sites.to_le_bytes());
                p.extend_from_slice(&init_s.to_le_bytes());
            }
            Message::Query { round, cts } => {
                p.extend_from_slice(&round.to_le_bytes());
                put_list(&mut p, cts);
            }
            Message::Reply {
                round,
                cts,
                server_s,
            } => {
                p.extend_from_slice(&round.to_le_bytes());
                put_list(&mut p, cts);
                p.extend_from_slice(&server_s.to_le_bytes());
            }
            Message::Finish => {}
            Message::Stats { json } => put_bytes(&mut p, json.as_bytes()),
            Message::Error { message } => put_bytes(&mut p, message.as_bytes()),
        }
        let mut f = Vec::with_capacity(HEADER_LEN + p.len() + 8);
        f.extend_from_slice(MAGIC);
        f.push(VERSION);
        f.push(self.kind());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(&fingerprint.to_le_bytes());
        f.extend_from_slice(&session.to_le_bytes());
        f.extend_from_slice(&(p.len() as u32).to_le_bytes());
        f.extend_from_slice(&p);
        let sum = xxh3_64(&f);
        f.extend_from_slice(&sum.to_le_bytes());
        f
    }

    /// Parses a frame. `expect` = `(fingerprint, session)` of the current session, when there
    /// is one: frames of other parameters or keys are refused (an `Error` frame is accepted
    /// with any, so the peer's refusal always gets through).
    pub fn decode(frame: &[u8], expect: Option<(u64, u64)>) -> Result<(Message, Header)> {
        let h = Header::parse(frame, MAX_PAYLOAD)?;
        let total = HEADER_LEN + h.length + 8;
        if frame.len() != total {
            return Err(proto(format!(
                "frame of {} bytes, its header announces {total} (truncated or trailing bytes)",
                frame.len()
            )));
        }
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&frame[total - 8..]);
        if u64::from_le_bytes(sum) != xxh3_64(&frame[..total - 8]) {
            return Err(proto("frame checksum mismatch (corrupted message)".into()));
        }
        if let Some((fp, session)) = expect {
            if h.kind != 7 && h.fingerprint != fp {
                return Err(proto(format!(
                    "message made for other CKKS parameters (fingerprint {:016x}, this session {fp:016x})",
                    h.fingerprint
                )));
            }
            if h.kind != 7 && h.session != session {
                return Err(proto(format!(
                    "message made for other keys (session {:016x}, this session {session:016x})",
                    h.session
                )));
            }
        }
        let mut r = Reader {
            b: &frame[HEADER_LEN..total - 8],
            at: 0,
        };
        let m = match h.kind {
            1 => Message::Hello {
                params: r.bytes()?,
                public_key: r.bytes()?,
                eval_keys: r.bytes()?,
                mode: Mode::from_code(r.u32()?)?,
                start: r.u32()?,
                length: r.u32()?,
            },
            2 => Message::HelloAck {
                haplotypes: r.u32()?,
                sites: r.u32()?,
                init_s: r.f64()?,
            },
            3 => Message::Query {
                round: r.u32()?,
                cts: r.list()?,
            },
            4 => Message::Reply {
                round: r.u32()?,
                cts: r.list()?,
                server_s: r.f64()?,
            },
            5 => Message::Finish,
            6 => Message::Stats { json: r.string()? },
            7 => Message::Error {
                message: r.string()?,
            },
            k => return Err(proto(format!("unknown message kind {k}"))),
        };
        if r.at != r.b.len() {
            return Err(proto(format!(
                "{} trailing bytes after a {} message",
                r.b.len() - r.at,
                m.name()
            )));
        }
        Ok((m, h))
    }
}

/// The fixed-size header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message kind code.
    pub kind: u8,
    /// CKKS parameter fingerprint.
    pub fingerprint: u64,
    /// Session (public key hash).
    pub session: u64,
    /// Payload length.
    pub length: usize,
}

impl Header {
    /// Parses and checks the header at the start of `b` (magic, version, reserved bits,
    /// payload length at most `max_payload`).
    pub fn parse(b: &[u8], max_payload: usize) -> Result<Header> {
        if b.len() < HEADER_LEN {
            return Err(proto(format!(
                "{} bytes are too few for a frame header ({HEADER_LEN})",
                b.len()
            )));
        }
        if &b[..4] != MAGIC {
            return Err(proto("not a heloom genome frame (bad magic)".into()));
        }
        if b[4] != VERSION {
            return Err(proto(format!(
                "protocol version {}, this program speaks {VERSION}: run the same heloom version on client and server",
                b[4]
            )));
        }
        if b[6] != 0 || b[7] != 0 {
            return Err(proto("nonzero reserved header bits".into()));
        }
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let length = u32::from_le_bytes([b[24], b[25], b[26], b[27]]) as usize;
        if length > max_payload {
            return Err(proto(format!(
                "payload of {length} bytes exceeds the limit of {max_payload}"
            )));
        }
        Ok(Header {
            kind: b[5],
            fingerprint: u64_at(8),
            session: u64_at(16),
            length,
        })
    }
}

fn proto(m: String) -> AppError {
    AppError::Protocol(m)
}

fn put_bytes(p: &mut Vec<u8>, b: &[u8]) {
    p.extend_from_slice(&(b.len() as u32).to_le_bytes());
    p.extend_from_slice(b);
}

fn put_list(p: &mut Vec<u8>, items: &[Vec<u8>]) {
    p.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for i in items {
        put_bytes(p, i);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| {
                proto(format!(
                    "truncated payload: {n} bytes wanted at offset {}, {} present",
                    self.at,
                    self.b.len()
                ))
            })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn f64(&mut self) -> Result<f64> {
        let s = self.take(8)?;
        let mut x = [0u8; 8];
        x.copy_from_slice(s);
        Ok(f64::from_le_bytes(x))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| proto("text field is not UTF-8".into()))
    }
    fn list(&mut self) -> Result<Vec<Vec<u8>>> {
        let n = self.u32()? as usize;
        if n > 16 {
            return Err(proto(format!(
                "{n} ciphertexts in one message (at most 16)"
            )));
        }
        (0..n).map(|_| self.bytes()).collect()
    }
}
