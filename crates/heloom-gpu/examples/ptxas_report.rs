//! Prints ptxas's resource report (registers, spills, shared memory) for every kernel on a real
//! architecture, compiled through NVRTC: `cargo run --release -p heloom-gpu --example
//! ptxas_report -- sm_90`. Needs NVRTC only (see `heloom_gpu::nvrtc`).

fn main() {
    let arch = std::env::args().nth(1).unwrap_or_else(|| "sm_90".into());
    match heloom_gpu::nvrtc::resource_report(&arch) {
        Ok(log) => print!("{log}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
