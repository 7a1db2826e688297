//! The server's per-site tables in a tiered store with a memory budget.
//!
//! Placeholder until `heloom-store` is merged: only the 100% budget (everything in memory).

use super::protocol::Server;
use crate::error::{AppError, Result};
use std::path::PathBuf;

/// The server with its tables under a memory budget of `fraction` of each session's tables,
/// spilling to `dir` (a temporary directory when `None`).
pub fn with_budget(server: Server, fraction: f64, _dir: Option<PathBuf>) -> Result<Server> {
    if fraction >= 1.0 {
        return Ok(server);
    }
    Err(AppError::Invalid(
        "memory budgets below 100% need the tiered store (heloom-store), not built in".into(),
    ))
}
