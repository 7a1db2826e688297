//! Key-switching timings on the system allocator (compare with `keyswitch_mimalloc`).

#[path = "common/keyswitch_timing.rs"]
mod timing;

fn main() -> heloom_ckks::Result<()> {
    timing::run("system")
}
