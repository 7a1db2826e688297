//! The server's per-site tables in a tiered store ([`heloom_store`]) with a memory budget.
//!
//! A session's encoded tables (two plaintexts per site the query touches, 384 KiB each at
//! `N = 2^13`) go into a [`Store`] whose budget is a fraction of their total; beyond it they
//! spill to checked files on local disk, written and read by the store's I/O threads. The
//! protocol's access order is known in advance — site `s`, then `s + 1`, ... — so the session
//! hands it to the store ([`Store::set_access_order`]): the store prefetches the next sites
//! while the current one is computed and evicts the value needed furthest in the future
//! (Belady). The evaluation keys (about 20 MB) stay in memory: the evaluator holds them as
//! one object, so they are outside the budget and reported separately.

use super::protocol::{Server, SiteTables, TableSource};
use crate::error::{AppError, Result};
use heloom_ckks::{Context, Plaintext};
use heloom_store::{Spill, Store, StoreConfig};
use std::path::PathBuf;
use std::sync::Arc;

impl Spill for SiteTables {
    fn to_spill(&self) -> Vec<u8> {
        let a = self.a.to_bytes();
        let mut out = Vec::with_capacity(2 * a.len() + 9);
        out.extend_from_slice(&(a.len() as u64).to_le_bytes());
        out.extend_from_slice(&a);
        if let Some(b) = &self.b_conj {
            out.push(1);
            out.extend_from_slice(&b.to_bytes());
        } else {
            out.push(0);
        }
        out
    }
    fn memory_bytes(&self) -> usize {
        SiteTables::memory_bytes(self)
    }
}

/// Reads [`Spill::to_spill`]'s bytes back.
fn load(ctx: &Context<u64>, b: &[u8]) -> std::result::Result<SiteTables, String> {
    let bad = || "site tables: truncated spill record".to_string();
    let head: [u8; 8] = b.get(..8).and_then(|s| s.try_into().ok()).ok_or_else(bad)?;
    let n = usize::try_from(u64::from_le_bytes(head)).map_err(|_| bad())?;
    let a_end = n.checked_add(8).filter(|&e| e < b.len()).ok_or_else(bad)?;
    let a = Plaintext::from_bytes(ctx, &b[8..a_end]).map_err(|e| e.to_string())?;
    let b_conj = match b[a_end] {
        0 => None,
        1 => Some(Plaintext::from_bytes(ctx, &b[a_end + 1..]).map_err(|e| e.to_string())?),
        f => return Err(format!("site tables: bad flag {f}")),
    };
    Ok(SiteTables { a, b_conj })
}

/// A session's tables in a store.
struct StoredTables {
    store: Store<SiteTables>,
    budget: Option<u64>,
    total: u64,
    fraction: f64,
}

impl TableSource for StoredTables {
    fn get(&self, k: u64) -> Result<Arc<SiteTables>> {
        self.store
            .get(k)
            .map_err(|e| AppError::Data(format!("tiered store: {e}")))
    }
    fn set_access_order(&self, keys: &[u64]) {
        self.store.set_access_order(keys);
    }
    fn stats(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.store.stats()).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("budget_fraction".into(), self.fraction.into());
            o.insert("budget_bytes".into(), self.budget.into());
            o.insert("working_set_bytes".into(), self.total.into());
            o.insert("resident_bytes".into(), self.store.resident_bytes().into());
        }
        v
    }
}

/// The server with each session's tables in a tiered store whose memory budget is `fraction`
/// of those tables (no budget at 1), spilling to `dir` (a private temporary directory when
/// `None`).
pub fn with_budget(server: Server, fraction: f64, dir: Option<PathBuf>) -> Result<Server> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(AppError::Invalid(format!(
            "budget fraction {fraction} is not in (0, 1]"
        )));
    }
    let ctx = Arc::clone(server.context());
    Ok(
        server.with_table_sink(Box::new(move |tables, order, total| {
            let budget = (fraction < 1.0).then(|| ((total as f64 * fraction) as u64).max(1));
            let loader_ctx = Arc::clone(&ctx);
            let config = StoreConfig {
                budget_bytes: budget,
                dir: dir.clone(),
                io_threads: 2,
                prefetch_depth: 4,
            };
            let store = Store::new(config, move |b: &[u8]| load(&loader_ctx, b))
                .map_err(|e| AppError::Data(format!("tiered store: {e}")))?;
            store.set_access_order(order);
            for t in tables {
                let (k, t) = t?;
                store
                    .insert(k, t)
                    .map_err(|e| AppError::Data(format!("tiered store: {e}")))?;
            }
            Ok(Box::new(StoredTables {
                store,
                budget,
                total,
                fraction,
            }) as Box<dyn TableSource>)
        })),
    )
}
