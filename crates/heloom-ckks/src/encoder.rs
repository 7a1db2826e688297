//! Placeholder: the CKKS encoder is being written in another worktree.

/// CKKS encoder (placeholder).
#[derive(Debug)]
pub struct Encoder;
