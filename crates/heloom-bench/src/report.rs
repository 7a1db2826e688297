//! What the harnesses' reports share: the modulus columns of a parameter set, the files a report
//! is saved as, and the checks of the command-line options.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use heloom_ckks::{security, CkksParameters, SecurityLevel};
use serde::Serialize;

/// The moduli of a parameter set and their key-switching split, as every report lists them
/// (flattened into its set's JSON).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ParamSummary {
    /// log2 Q.
    pub log_q: f64,
    /// log2 QP.
    pub log_qp: f64,
    /// The bound on log2 QP at this N for the security level asked (`None`: security opted out).
    pub max_log_qp: Option<u32>,
    /// Decomposition number of hybrid key switching.
    pub dnum: usize,
    /// Special primes (primes per digit).
    pub alpha: usize,
}

impl ParamSummary {
    /// The summary of `p`, its log2 QP bounded at `level`.
    pub fn of(p: &CkksParameters, level: SecurityLevel) -> Self {
        Self {
            log_q: p.log_q(),
            log_qp: p.log_qp(),
            max_log_qp: security::max_log_qp(p.n(), level),
            dnum: p.dnum(),
            alpha: p.alpha(),
        }
    }

    /// The column heads `log Q`, `log QP/max`, `dnum` and `alpha`; the second `qp_width` wide.
    pub fn header(qp_width: usize) -> String {
        format!(
            "{:>7} {:>qp_width$} {:>5} {:>5}",
            "log Q", "log QP/max", "dnum", "alpha"
        )
    }

    /// This set's cells under [`ParamSummary::header`]; `none` stands for a missing bound.
    pub fn cells(&self, qp_width: usize, none: &str) -> String {
        let max = self
            .max_log_qp
            .map_or_else(|| none.to_string(), |x| x.to_string());
        format!(
            "{:>7.1} {:>qp_width$} {:>5} {:>5}",
            self.log_q,
            format!("{:.1}/{max}", self.log_qp),
            self.dnum,
            self.alpha
        )
    }
}

/// Writes `<stem>.json` (the report) and `<stem>.txt` (`text`) into `dir`; returns their paths.
pub fn save_json_and_text<R: Serialize>(
    rep: &R,
    text: &str,
    dir: &Path,
    stem: &str,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join(format!("{stem}.json"));
    let txt = dir.join(format!("{stem}.txt"));
    std::fs::write(&json, serde_json::to_string_pretty(rep)?)
        .with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(&txt, text).with_context(|| format!("writing {}", txt.display()))?;
    Ok(vec![json, txt])
}

/// `value` when it is at least 1; an error naming the option `flag` otherwise.
pub fn at_least_one(flag: &str, value: usize) -> Result<usize> {
    if value == 0 {
        bail!("{flag} must be at least 1");
    }
    Ok(value)
}

/// Refuses word sizes other than 32 and 64.
pub fn check_word_bits(words: &[u32]) -> Result<()> {
    if let Some(w) = words.iter().find(|&&w| w != 32 && w != 64) {
        bail!("--word-bits {w}: word sizes are 32 and 64");
    }
    Ok(())
}
