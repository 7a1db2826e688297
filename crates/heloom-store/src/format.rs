//! The spill file format: a 40-byte header and the value's bytes.
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 8    | magic `"HLSTORE1"` ([`MAGIC`])                     |
//! | 8      | 8    | key (u64, little-endian)                           |
//! | 16     | 8    | version of the value (u64; a counter of inserts)   |
//! | 24     | 8    | payload length in bytes                           |
//! | 32     | 8    | [`hash64`] of the payload                          |
//! | 40     | len  | payload: exactly what [`crate::Spill::to_spill`] returned |

/// The eight bytes every spill file starts with (the trailing `1` is the format version).
pub const MAGIC: [u8; 8] = *b"HLSTORE1";

/// Header length in bytes.
pub const HEADER_LEN: usize = 40;

/// The header of a payload of `key` at `version`.
pub fn header(key: u64, version: u64, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..16].copy_from_slice(&key.to_le_bytes());
    h[16..24].copy_from_slice(&version.to_le_bytes());
    h[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    h[32..40].copy_from_slice(&hash64(payload).to_le_bytes());
    h
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The payload of a whole spill file of `key`, after checking magic, key, length and hash;
/// `Err` says what is wrong.
pub fn payload(file: &[u8], key: u64) -> Result<&[u8], String> {
    if file.len() < HEADER_LEN {
        return Err(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header (truncated)",
            file.len()
        ));
    }
    if file[0..8] != MAGIC {
        return Err("bad magic: not a heloom spill file".into());
    }
    let stored_key = u64_at(file, 8);
    if stored_key != key {
        return Err(format!("the file holds key {stored_key:#x}"));
    }
    let len = u64_at(file, 24);
    let have = (file.len() - HEADER_LEN) as u64;
    if len != have {
        return Err(format!(
            "the header announces {len} payload bytes, the file has {have} (truncated or overwritten)"
        ));
    }
    let body = &file[HEADER_LEN..];
    let (want, got) = (u64_at(file, 32), hash64(body));
    if want != got {
        return Err(format!(
            "checksum mismatch (stored {want:016x}, computed {got:016x})"
        ));
    }
    Ok(body)
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, v: u64) -> u64 {
    (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

fn word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&chunk[..8]);
    u64::from_le_bytes(w)
}

/// XXH64 with seed 0 (the xxHash 64-bit algorithm, written from its specification): four
/// independent lanes, so it runs at several GB/s and hashing a spilled value costs far less
/// than writing it.
pub fn hash64(data: &[u8]) -> u64 {
    let len = data.len() as u64;
    let stripes = data.chunks_exact(32);
    let rest = stripes.remainder();
    let mut h = if data.len() >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        for s in stripes {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, word(&s[8 * i..]));
            }
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(len);
    let words = rest.chunks_exact(8);
    let mut tail = words.remainder();
    for w in words {
        h = (h ^ round(0, word(w)))
            .rotate_left(27)
            .wrapping_mul(P1)
            .wrapping_add(P4);
    }
    if tail.len() >= 4 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&tail[..4]);
        h = (h ^ u64::from(u32::from_le_bytes(w)).wrapping_mul(P1))
            .rotate_left(23)
            .wrapping_mul(P2)
            .wrapping_add(P3);
        tail = &tail[4..];
    }
    for &b in tail {
        h = (h ^ u64::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh64_reference_values() {
        assert_eq!(hash64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(hash64(b"abc"), 0x44BC_2CF5_AD77_0999);
    }

    #[test]
    fn every_length_round_trips_and_detects_a_flip() {
        for n in [0usize, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
            let mut file = header(9, 1, &data).to_vec();
            file.extend_from_slice(&data);
            assert_eq!(payload(&file, 9), Ok(&data[..]));
            assert!(payload(&file, 8).is_err());
            assert!(payload(&file[..file.len().saturating_sub(1)], 9).is_err());
            if n > 0 {
                file[HEADER_LEN + n / 2] ^= 0x10;
                assert!(payload(&file, 9).is_err());
            }
        }
    }
}
