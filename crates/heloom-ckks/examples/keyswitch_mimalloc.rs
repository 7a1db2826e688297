//! Key-switching timings on mimalloc (compare with `keyswitch_system`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/keyswitch_timing.rs"]
mod timing;

fn main() -> heloom_ckks::Result<()> {
    // As the heloom binary and the Python extension do.
    heloom_pool::retain_freed_memory();
    timing::run("mimalloc")
}
