//! (in progress)
/// Cost curves per device.
#[derive(Default)]
pub struct CostBook;
