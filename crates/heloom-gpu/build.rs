//! Compiles the kernel emulator: the CUDA kernels in `kernels/` built for the host with
//! `emu/emu.hpp` standing in for the CUDA built-ins (C++17; any g++ or clang++ of the last years).

fn main() {
    for f in [
        "emu/emu.cpp",
        "emu/emu.hpp",
        "kernels/arith.cuh",
        "kernels/ntt.cu",
        "kernels/eltwise.cu",
        "kernels/rns.cu",
        "kernels/keyswitch.cu",
        "kernels/naive.cu",
        "kernels/kernels.list",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .file("emu/emu.cpp")
        .flag("-std=c++17")
        // Products and sums separately rounded, as the kernels' __dmul_rn / __dadd_rn are.
        .flag("-ffp-contract=off")
        .flag_if_supported("-fno-fast-math")
        .warnings(true)
        .opt_level(2)
        .compile("heloom_gpu_emu");
}
