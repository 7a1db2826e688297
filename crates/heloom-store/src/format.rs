//! The spill file format (version 2): a 40-byte header and the value's bytes.
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 8    | magic `"HLSTORE2"` ([`MAGIC`]; the `2` is the format version) |
//! | 8      | 8    | key (u64, little-endian)                           |
//! | 16     | 8    | version of the value (u64; a counter of inserts)   |
//! | 24     | 8    | payload length in bytes                           |
//! | 32     | 8    | XXH3-64 ([`hash64`]) of bytes 0..32 and the payload |
//! | 40     | len  | payload: exactly what [`crate::Spill::to_spill`] returned |
//!
//! The checksum covers the header too, so a file whose key, version or length was changed is
//! refused as well as one whose payload was. Version 1 (`"HLSTORE1"`, the checksum over the
//! payload only) is refused with a message that says what to do: spill files live only as
//! long as their store.

use xxhash_rust::xxh3::Xxh3;

/// The eight bytes every spill file starts with (the trailing `2` is the format version).
pub const MAGIC: [u8; 8] = *b"HLSTORE2";

/// Header length in bytes.
pub const HEADER_LEN: usize = 40;

/// The checksum of a spill file: XXH3-64 (seed 0) of the first 32 header bytes followed by
/// the payload.
fn checksum(head: &[u8], payload: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(head);
    h.update(payload);
    h.digest()
}

/// XXH3-64 with seed 0 of `data` (from the `xxhash-rust` crate).
pub fn hash64(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

/// The header of a payload of `key` at `version`.
pub fn header(key: u64, version: u64, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..16].copy_from_slice(&key.to_le_bytes());
    h[16..24].copy_from_slice(&version.to_le_bytes());
    h[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let sum = checksum(&h[..32], payload);
    h[32..40].copy_from_slice(&sum.to_le_bytes());
    h
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The payload of a whole spill file of `key`, after checking magic, key, length and
/// checksum; `Err` says what is wrong.
pub fn payload(file: &[u8], key: u64) -> Result<&[u8], String> {
    if file.len() < HEADER_LEN {
        return Err(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header (truncated)",
            file.len()
        ));
    }
    if file[0..8] == *b"HLSTORE1" {
        return Err(
            "spill file format 1, written by an older heloom: spill files live only as long as their store; delete the spill directory and insert the values again"
                .into(),
        );
    }
    if file[0..8] != MAGIC {
        return Err("bad magic: not a heloom spill file".into());
    }
    let len = u64_at(file, 24);
    let have = (file.len() - HEADER_LEN) as u64;
    if len != have {
        return Err(format!(
            "the header announces {len} payload bytes, the file has {have} (truncated or overwritten)"
        ));
    }
    let body = &file[HEADER_LEN..];
    let (want, got) = (u64_at(file, 32), checksum(&file[..32], body));
    if want != got {
        return Err(format!(
            "checksum mismatch (stored {want:016x}, computed {got:016x}): the file was corrupted on disk"
        ));
    }
    let stored_key = u64_at(file, 8);
    if stored_key != key {
        return Err(format!("the file holds key {stored_key:#x}"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_reference_values() {
        // Known answers of XXH3-64 with seed 0 (xxHash's test vectors).
        assert_eq!(hash64(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(hash64(b"a"), 0xE6C6_32B6_1E96_4E1F);
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
            // Every single-bit flip, header included, is refused.
            for bit in 0..8 * file.len() {
                file[bit / 8] ^= 1 << (bit % 8);
                assert!(payload(&file, 9).is_err(), "n = {n}, bit {bit}");
                file[bit / 8] ^= 1 << (bit % 8);
            }
        }
    }

    #[test]
    fn version_1_is_refused_with_advice() {
        let mut file = header(9, 1, b"abc").to_vec();
        file.extend_from_slice(b"abc");
        file[0..8].copy_from_slice(b"HLSTORE1");
        let Err(e) = payload(&file, 9) else {
            panic!("a version-1 spill file loaded");
        };
        assert!(
            e.contains("format 1") && e.contains("delete the spill directory"),
            "{e}"
        );
    }
}
