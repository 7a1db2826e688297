//! Prints ptxas's resource report (registers, spills, shared memory) for every kernel on a real
//! architecture, compiled through NVRTC: `cargo run --release -p heloom-gpu --example
//! ptxas_report -- sm_90 [RADIX]`, RADIX 4, 8 or 16 for the NTT kernels as a GPU build with
//! that `HELOOM_GPU_NTT_RADIX` compiles them (default: every round size compiled in). Needs
//! NVRTC only (see `heloom_gpu::nvrtc`).

fn main() {
    let arch = std::env::args().nth(1).unwrap_or_else(|| "sm_90".into());
    let report = match std::env::args().nth(2).as_deref() {
        None => heloom_gpu::nvrtc::resource_report(&arch),
        Some("4") => heloom_gpu::nvrtc::resource_report_for_radix(&arch, 2),
        Some("8") => heloom_gpu::nvrtc::resource_report_for_radix(&arch, 3),
        Some("16") => heloom_gpu::nvrtc::resource_report_for_radix(&arch, 4),
        Some(other) => {
            eprintln!("radix {other:?}: use 4, 8 or 16");
            std::process::exit(2);
        }
    };
    match report {
        Ok(log) => print!("{log}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
