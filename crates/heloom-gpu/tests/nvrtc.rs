//! Every kernel compiles through NVRTC for Turing, Ampere and Hopper, and the PTX defines every
//! listed entry point. Needs only NVRTC (no GPU, no driver): CI loads it from the PyPI wheel
//! `nvidia-cuda-nvrtc-cu12` and sets HELOOM_REQUIRE_NVRTC=1, so a kernel that does not compile
//! fails CI. Elsewhere, without NVRTC, the test says so and passes.

#[test]
fn every_kernel_compiles_with_nvrtc() {
    let required = std::env::var("HELOOM_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    match heloom_gpu::nvrtc::load() {
        Ok(from) => {
            let (major, minor) = heloom_gpu::nvrtc::version().expect("NVRTC version");
            let archs = heloom_gpu::nvrtc::compile_check().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(archs.len(), heloom_gpu::nvrtc::CHECK_ARCHS.len());
            for (arch, bytes) in archs {
                assert!(bytes > 10_000, "{arch}: PTX of only {bytes} bytes");
                eprintln!("NVRTC {major}.{minor} ({from}): {arch} PTX {bytes} bytes");
            }
            for arch in heloom_gpu::nvrtc::CUBIN_ARCHS {
                let bytes =
                    heloom_gpu::nvrtc::compile_cubin(arch).unwrap_or_else(|e| panic!("{e}"));
                assert!(bytes > 10_000, "{arch}: machine code of only {bytes} bytes");
                eprintln!("NVRTC {major}.{minor}: {arch} machine code {bytes} bytes");
            }
        }
        Err(e) => {
            assert!(!required, "HELOOM_REQUIRE_NVRTC=1 but {e}");
            eprintln!("NVRTC compile check skipped: {e}");
        }
    }
}

#[test]
fn broken_kernels_are_reported_with_the_log() {
    if heloom_gpu::nvrtc::load().is_err() {
        eprintln!("skipped: no NVRTC");
        return;
    }
    let e = heloom_gpu::nvrtc::compile_source(
        "extern \"C\" __global__ void k() { undefined_thing(); }",
        "compute_90",
    )
    .expect_err("must not compile");
    let msg = e.to_string();
    assert!(msg.contains("undefined_thing"), "{msg}");
}
