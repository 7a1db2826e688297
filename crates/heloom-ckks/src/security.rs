//! The Homomorphic Encryption Standard's security table (Albrecht et al., 2018, Table 1,
//! ternary secret, classical attacks): the largest `log2(QP)` per ring degree.

use std::fmt;

/// Requested security level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityLevel {
    /// 128-bit classical security (the default).
    Bits128,
    /// 192-bit classical security.
    Bits192,
    /// 256-bit classical security.
    Bits256,
    /// Explicit opt-out: no bound is enforced. For experiments only.
    None,
}

impl SecurityLevel {
    /// Security in bits (0 for the opt-out).
    pub fn bits(self) -> u32 {
        match self {
            SecurityLevel::Bits128 => 128,
            SecurityLevel::Bits192 => 192,
            SecurityLevel::Bits256 => 256,
            SecurityLevel::None => 0,
        }
    }

    /// From a number of bits: 128, 192, 256, or 0 for the opt-out.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            128 => Some(SecurityLevel::Bits128),
            192 => Some(SecurityLevel::Bits192),
            256 => Some(SecurityLevel::Bits256),
            0 => Some(SecurityLevel::None),
            _ => None,
        }
    }
}

impl fmt::Display for SecurityLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecurityLevel::None => write!(f, "none"),
            s => write!(f, "{}-bit", s.bits()),
        }
    }
}

/// `(log2 N, 128-bit, 192-bit, 256-bit)` maximum `log2(QP)`.
///
/// N = 2^10 .. 2^15: the standard's table. N = 2^16 and 2^17 are beyond the standard; the
/// 128-bit entries are OpenFHE's (1747, 3523), and the 192/256-bit entries scale the standard's
/// 2^15 entries by the same factors as OpenFHE's 128-bit ones (1747/881 then 3523/1747).
const TABLE: [(u32, u32, u32, u32); 8] = [
    (10, 27, 19, 14),
    (11, 54, 37, 29),
    (12, 109, 75, 58),
    (13, 218, 152, 118),
    (14, 438, 305, 237),
    (15, 881, 611, 476),
    (16, 1747, 1211, 944),
    (17, 3523, 2442, 1903),
];

/// The largest `log2(QP)` allowed for ring degree `n` at `level`; `None` for the opt-out or a
/// degree outside the table (those are refused earlier).
pub fn max_log_qp(n: usize, level: SecurityLevel) -> Option<u32> {
    let log_n = n.trailing_zeros();
    let row = TABLE.iter().find(|r| r.0 == log_n)?;
    match level {
        SecurityLevel::Bits128 => Some(row.1),
        SecurityLevel::Bits192 => Some(row.2),
        SecurityLevel::Bits256 => Some(row.3),
        SecurityLevel::None => None,
    }
}

/// The highest security level (bits) whose bound `log_qp` meets at degree `n`.
pub fn estimate(n: usize, log_qp: f64) -> Option<u32> {
    let log_n = n.trailing_zeros();
    let row = TABLE.iter().find(|r| r.0 == log_n)?;
    if log_qp <= row.3 as f64 {
        Some(256)
    } else if log_qp <= row.2 as f64 {
        Some(192)
    } else if log_qp <= row.1 as f64 {
        Some(128)
    } else {
        None
    }
}
