//! Private genome search (seed 004): the longest match of an encrypted query in a haplotype
//! panel, over the positional Burrows-Wheeler transform.
//!
//! Docs to be completed.

pub mod net;
pub mod panel;
pub mod pbwt;
pub mod protocol;
pub mod wire;

pub use panel::Panel;
pub use pbwt::{brute_force, MatchResult, Pbwt};
pub use protocol::{run_query, Client, LocalTransport, QueryOutcome, Server};
pub use wire::{Message, Mode};
