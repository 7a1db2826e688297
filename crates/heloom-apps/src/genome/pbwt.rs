//! The positional Burrows-Wheeler transform (Durbin 2014) of a panel, its rank tables, and the
//! plaintext longest-match search every encrypted answer is checked against.
//!
//! `a_k` orders the haplotypes by their reversed prefixes (sites `k-1, k-2, ..`), so for any
//! start `s <= k` the haplotypes equal to a query on sites `s..k` form one interval `[f, g)` of
//! `a_k`. `a_{k+1}` is the stable partition of `a_k` by the allele at site `k`, which gives the
//! interval update for allele `x`: `f' = V_k^x[f]`, `g' = V_k^x[g]` with
//! `V_k^0[i] = u_k(i)` (zeros among the first `i` haplotypes of `a_k` at site `k`) and
//! `V_k^1[i] = c_k + i - u_k(i)` (`c_k` zeros at site `k`); `i` ranges over `0..=M`.

use super::panel::Panel;
use crate::error::{AppError, Result};

/// Longest match of a query: the largest `t` such that some haplotype equals the query's first
/// `t` alleles, and how many haplotypes do (all `M` when `t = 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MatchResult {
    /// Longest match length `t` (sites from the start).
    pub length: usize,
    /// Haplotypes matching the query on those `t` sites.
    pub count: usize,
}

/// The PBWT rank tables of a panel: `u_k(i)` for every site `k` and `i` in `0..=M`, and `c_k`.
#[derive(Clone, Debug)]
pub struct Pbwt {
    haplotypes: usize,
    sites: usize,
    zeros: Vec<u32>,
    ranks: Vec<u16>,
}

impl Pbwt {
    /// Builds the prefix arrays site by site (Durbin 2014, Algorithm 1) and keeps the rank
    /// tables; `O(M S)` time, `2 (M + 1) S` bytes.
    pub fn build(panel: &Panel) -> Result<Self> {
        let (m, s) = (panel.haplotypes(), panel.sites());
        if m > u16::MAX as usize {
            return Err(AppError::Invalid(format!(
                "{m} haplotypes: the rank tables hold at most {} (16-bit ranks)",
                u16::MAX
            )));
        }
        let mut a: Vec<usize> = (0..m).collect();
        let mut next = Vec::with_capacity(m);
        let mut ones = Vec::with_capacity(m);
        let mut zeros = Vec::with_capacity(s);
        let mut ranks = Vec::with_capacity((m + 1) * s);
        for k in 0..s {
            next.clear();
            ones.clear();
            ranks.push(0u16);
            let mut u = 0u16;
            for &h in &a {
                if panel.allele(k, h) == 0 {
                    u += 1;
                    next.push(h);
                } else {
                    ones.push(h);
                }
                ranks.push(u);
            }
            zeros.push(u32::from(u));
            next.extend_from_slice(&ones);
            std::mem::swap(&mut a, &mut next);
        }
        Ok(Self {
            haplotypes: m,
            sites: s,
            zeros,
            ranks,
        })
    }

    /// Number of haplotypes M.
    pub fn haplotypes(&self) -> usize {
        self.haplotypes
    }

    /// Number of sites S.
    pub fn sites(&self) -> usize {
        self.sites
    }

    /// `V_k^x[i]`: where position `i` of `a_k` goes in `a_{k+1}` for allele `x` (`k < S`,
    /// `i <= M`, `x` 0 or 1; callers check).
    pub fn rank(&self, k: usize, x: u8, i: usize) -> usize {
        let u = self.ranks[k * (self.haplotypes + 1) + i] as usize;
        if x == 0 {
            u
        } else {
            self.zeros[k] as usize + i - u
        }
    }

    /// The table `V_k^x[0..=M]`.
    pub fn rank_table(&self, k: usize, x: u8) -> Vec<usize> {
        (0..=self.haplotypes).map(|i| self.rank(k, x, i)).collect()
    }

    /// Checks that `start..start + query.len()` lies in the panel and the alleles are 0/1.
    pub fn check_query(&self, start: usize, query: &[u8]) -> Result<()> {
        if start
            .checked_add(query.len())
            .is_none_or(|e| e > self.sites)
        {
            return Err(AppError::Invalid(format!(
                "query of length {} from site {start} does not fit in {} sites",
                query.len(),
                self.sites
            )));
        }
        if let Some(p) = query.iter().position(|&x| x > 1) {
            return Err(AppError::Invalid(format!(
                "query allele {} at position {p}: alleles are 0 or 1",
                query[p]
            )));
        }
        Ok(())
    }

    /// The interval `[f, g)` after each query character: `intervals[t]` is the interval of
    /// the haplotypes matching the first `t` alleles (`intervals[0] = (0, M)`).
    pub fn intervals(&self, start: usize, query: &[u8]) -> Result<Vec<(usize, usize)>> {
        self.check_query(start, query)?;
        let mut out = Vec::with_capacity(query.len() + 1);
        let (mut f, mut g) = (0, self.haplotypes);
        out.push((f, g));
        for (j, &x) in query.iter().enumerate() {
            f = self.rank(start + j, x, f);
            g = self.rank(start + j, x, g);
            out.push((f, g));
        }
        Ok(out)
    }

    /// The plaintext reference: longest match of `query` starting at site `start`.
    pub fn longest_match(&self, start: usize, query: &[u8]) -> Result<MatchResult> {
        let iv = self.intervals(start, query)?;
        Ok(result_from_counts(iv.iter().map(|&(f, g)| g - f)))
    }
}

/// The match result from the counts `g - f` after 0, 1, .. characters: the last nonzero one.
pub fn result_from_counts(counts: impl IntoIterator<Item = usize>) -> MatchResult {
    let mut r = MatchResult {
        length: 0,
        count: 0,
    };
    for (t, c) in counts.into_iter().enumerate() {
        if c == 0 {
            break;
        }
        r = MatchResult {
            length: t,
            count: c,
        };
    }
    r
}

/// Brute force over every haplotype (tests): the longest common prefix of the query with each
/// haplotype from `start`, maximised, and how many haplotypes reach it.
pub fn brute_force(panel: &Panel, start: usize, query: &[u8]) -> MatchResult {
    let mut best = MatchResult {
        length: 0,
        count: 0,
    };
    for h in 0..panel.haplotypes() {
        let t = query
            .iter()
            .enumerate()
            .take_while(|&(j, &x)| start + j < panel.sites() && panel.allele(start + j, h) == x)
            .count();
        if t > best.length {
            best = MatchResult {
                length: t,
                count: 1,
            };
        } else if t == best.length {
            best.count += 1;
        }
    }
    best
}

/// Answers of the non-interactive mode: entry `x` (query alleles `z_j = (x >> j) & 1`) is the
/// longest match of that query of length `len` from `start`. `2^len` entries.
pub fn all_answers(pbwt: &Pbwt, start: usize, len: usize) -> Result<Vec<MatchResult>> {
    if len > 16 {
        return Err(AppError::Invalid(format!(
            "2^{len} answers are too many (at most 2^16)"
        )));
    }
    (0..1usize << len)
        .map(|x| {
            let q: Vec<u8> = (0..len).map(|j| ((x >> j) & 1) as u8).collect();
            pbwt.longest_match(start, &q)
        })
        .collect()
}
