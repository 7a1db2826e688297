//! Haplotype panels: `M` haplotypes by `S` biallelic sites, stored site-major and bit-packed.
//!
//! File format `HLPANEL1` (optionally gzip-compressed; the repository's panel is), written by
//! `crates/heloom-apps/train/make_panel.py` and [`Panel::to_bytes`]:
//!
//! ```text
//! b"HLPANEL1"  u32 LE haplotypes M  u32 LE sites S
//! S rows of ceil(M / 8) bytes: bit h % 8 of byte h / 8 is haplotype h's allele at the site
//! u64 LE FNV-1a 64 of every byte before it
//! ```

use crate::error::{AppError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::io::Read;

const MAGIC: &[u8; 8] = b"HLPANEL1";
/// Largest panel accepted when reading a file (haplotypes times sites), 4 Gbit.
const MAX_CELLS: u64 = 1 << 32;

/// The repository's panel (msprime coalescent simulation, see `train/make_panel.py`), gzip.
static EMBEDDED: &[u8] = include_bytes!("../../data/panel_2184x10000.bin.gz");

/// FNV-1a 64 (the panel file's checksum and the protocol's session id).
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A haplotype panel: `haplotypes` rows (M) by `sites` biallelic sites (S), alleles 0/1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Panel {
    haplotypes: usize,
    sites: usize,
    row_bytes: usize,
    bits: Vec<u8>,
}

impl Panel {
    /// A panel from `alleles[site][haplotype]` (each 0 or 1).
    pub fn from_sites(alleles: &[Vec<u8>]) -> Result<Self> {
        let sites = alleles.len();
        let haplotypes = alleles.first().map_or(0, Vec::len);
        if sites == 0 || haplotypes == 0 {
            return Err(AppError::Invalid(
                "a panel needs at least one site and one haplotype".into(),
            ));
        }
        let row_bytes = haplotypes.div_ceil(8);
        let mut bits = vec![0u8; row_bytes * sites];
        for (k, row) in alleles.iter().enumerate() {
            if row.len() != haplotypes {
                return Err(AppError::Invalid(format!(
                    "site {k} has {} alleles, site 0 has {haplotypes}",
                    row.len()
                )));
            }
            for (h, &a) in row.iter().enumerate() {
                match a {
                    0 => {}
                    1 => bits[k * row_bytes + h / 8] |= 1 << (h % 8),
                    _ => {
                        return Err(AppError::Invalid(format!(
                            "allele {a} at site {k}, haplotype {h}: alleles are 0 or 1"
                        )))
                    }
                }
            }
        }
        Ok(Self {
            haplotypes,
            sites,
            row_bytes,
            bits,
        })
    }

    /// A deterministic synthetic panel for tests: each haplotype copies a mosaic of a few
    /// founders (switching with probability `1/20` per site) with `1%` mutations, so long
    /// shared segments exist as in real data (a copying model after Li and Stephens 2003).
    pub fn synthetic(haplotypes: usize, sites: usize, seed: u64) -> Result<Self> {
        if haplotypes == 0 || sites == 0 {
            return Err(AppError::Invalid(
                "a panel needs at least one site and one haplotype".into(),
            ));
        }
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let founders = 8.min(haplotypes);
        let f: Vec<Vec<u8>> = (0..founders)
            .map(|_| (0..sites).map(|_| u8::from(rng.gen_bool(0.3))).collect())
            .collect();
        let mut alleles = vec![vec![0u8; haplotypes]; sites];
        for h in 0..haplotypes {
            let mut src = rng.gen_range(0..founders);
            for (k, row) in alleles.iter_mut().enumerate() {
                if rng.gen_bool(0.05) {
                    src = rng.gen_range(0..founders);
                }
                let mut a = f[src][k];
                if rng.gen_bool(0.01) {
                    a ^= 1;
                }
                row[h] = a;
            }
        }
        Self::from_sites(&alleles)
    }

    /// The repository's 2,184 x 10,000 panel (coalescent simulation with msprime).
    pub fn embedded() -> Result<Self> {
        Self::from_bytes(EMBEDDED)
    }

    /// Reads a panel file (plain or gzip).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let bytes = std::fs::read(path)
            .map_err(|e| AppError::Data(format!("cannot read panel {}: {e}", path.display())))?;
        Self::from_bytes(&bytes)
    }

    /// Parses HLPANEL1 bytes, gunzipping first when they start with the gzip magic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut raw = Vec::new();
            flate2::read::GzDecoder::new(bytes)
                .take(MAX_CELLS / 8 + 1024)
                .read_to_end(&mut raw)
                .map_err(|e| AppError::Format(format!("panel: bad gzip stream: {e}")))?;
            return Self::parse(&raw);
        }
        Self::parse(bytes)
    }

    fn parse(b: &[u8]) -> Result<Self> {
        let bad = |m: &str| AppError::Format(format!("panel: {m}"));
        if b.len() < 24 || &b[..8] != MAGIC {
            return Err(bad("not an HLPANEL1 file (bad magic or too short)"));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
        let (haplotypes, sites) = (u32_at(8), u32_at(12));
        if haplotypes == 0 || sites == 0 || (haplotypes as u64) * (sites as u64) > MAX_CELLS {
            return Err(bad(&format!(
                "implausible dimensions {haplotypes} x {sites}"
            )));
        }
        let row_bytes = haplotypes.div_ceil(8);
        let body = 16 + row_bytes * sites;
        if b.len() != body + 8 {
            return Err(bad(&format!(
                "{} bytes, expected {} for {haplotypes} haplotypes x {sites} sites (truncated?)",
                b.len(),
                body + 8
            )));
        }
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&b[body..]);
        if u64::from_le_bytes(sum) != fnv1a64(&b[..body]) {
            return Err(bad("checksum mismatch (corrupted file)"));
        }
        let bits = b[16..body].to_vec();
        // Padding bits past the last haplotype must be zero, so equal panels have equal bytes.
        if haplotypes % 8 != 0 {
            let mask = !((1u8 << (haplotypes % 8)) - 1);
            if (0..sites).any(|k| bits[k * row_bytes + row_bytes - 1] & mask != 0) {
                return Err(bad("nonzero padding bits"));
            }
        }
        Ok(Self {
            haplotypes,
            sites,
            row_bytes,
            bits,
        })
    }

    /// HLPANEL1 bytes (uncompressed).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.bits.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.haplotypes as u32).to_le_bytes());
        out.extend_from_slice(&(self.sites as u32).to_le_bytes());
        out.extend_from_slice(&self.bits);
        let sum = fnv1a64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Number of haplotypes (M).
    pub fn haplotypes(&self) -> usize {
        self.haplotypes
    }

    /// Number of sites (S).
    pub fn sites(&self) -> usize {
        self.sites
    }

    /// Allele of haplotype `h` at site `k` (callers keep `h < M`, `k < S`).
    pub fn allele(&self, k: usize, h: usize) -> u8 {
        (self.bits[k * self.row_bytes + h / 8] >> (h % 8)) & 1
    }

    /// Alleles of haplotype `h` on sites `start..start + len` (clipped to the panel).
    pub fn haplotype_segment(&self, h: usize, start: usize, len: usize) -> Vec<u8> {
        (start..(start + len).min(self.sites))
            .map(|k| self.allele(k, h))
            .collect()
    }

    /// The first `haplotypes` haplotypes of this panel on all its sites (tests, held-out
    /// queries).
    pub fn subset(&self, haplotypes: std::ops::Range<usize>) -> Result<Self> {
        if haplotypes.is_empty() || haplotypes.end > self.haplotypes {
            return Err(AppError::Invalid(format!(
                "haplotype range {haplotypes:?} is not inside 0..{}",
                self.haplotypes
            )));
        }
        let alleles: Vec<Vec<u8>> = (0..self.sites)
            .map(|k| haplotypes.clone().map(|h| self.allele(k, h)).collect())
            .collect();
        Self::from_sites(&alleles)
    }
}
