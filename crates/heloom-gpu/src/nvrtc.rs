//! NVRTC: compiling the kernels at run time, so heloom builds without a CUDA toolkit and runs
//! wherever a driver is present.
//!
//! The library is found by the dynamic loader (`libnvrtc.so`, `.so.12`, ...), or first loaded
//! from `$HELOOM_NVRTC` (a file) or the usual CUDA install folders; the PyPI wheel
//! `nvidia-cuda-nvrtc-cu12` works too (CI compile-checks every kernel with it).

use crate::error::{GpuError, Result};
use crate::source::cuda_source;
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Virtual architectures CI compiles every kernel for: Volta, Ampere, Hopper.
pub const CHECK_ARCHS: [&str; 3] = ["compute_70", "compute_80", "compute_90"];

static PRELOADED: OnceLock<Option<(PathBuf, libloading::Library)>> = OnceLock::new();

fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("HELOOM_NVRTC") {
        out.push(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(PathBuf::from(d).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for d in dirs {
        for f in ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"] {
            out.push(d.join(f));
        }
    }
    out
}

/// Loads NVRTC if it can be found; returns where it came from ("the dynamic loader" when the
/// system search path has it).
pub fn load() -> Result<String> {
    let pre = PRELOADED.get_or_init(|| {
        candidates()
            .into_iter()
            .filter(|p| p.is_file())
            .find_map(|p| {
                // SAFETY: loading NVIDIA's NVRTC library, whose initialisers have no preconditions;
                // once loaded under its soname, cudarc's own dlopen finds this copy.
                let lib = unsafe { libloading::Library::new(&p) }.ok()?;
                Some((p, lib))
            })
    });
    // SAFETY: probes for the library with dlopen; no symbol of it is called.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(match pre {
            Some((p, _)) => p.display().to_string(),
            None => "the dynamic loader's search path".into(),
        });
    }
    Err(GpuError::NvrtcMissing(
        "libnvrtc was not found. Install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc-cu12` \
         and set HELOOM_NVRTC to its lib/libnvrtc.so.12 (or add that folder to LD_LIBRARY_PATH)"
            .into(),
    ))
}

/// NVRTC's version as (major, minor).
pub fn version() -> Result<(i32, i32)> {
    load()?;
    let mut major = 0;
    let mut minor = 0;
    // SAFETY: NVRTC is loaded (checked above); nvrtcVersion writes two ints we own.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(GpuError::NvrtcMissing(format!(
            "nvrtcVersion failed: {r:?}"
        )));
    }
    Ok((major, minor))
}

/// Compiles every kernel to PTX for `arch` (a virtual architecture such as `compute_90`).
pub fn compile(arch: &'static str) -> Result<Ptx> {
    load()?;
    let opts = CompileOptions {
        arch: Some(arch),
        // No fused multiply-add anywhere: the base conversion's rounding must match the CPU's.
        fmad: Some(false),
        name: Some("heloom_kernels.cu".into()),
        options: vec!["-default-device".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(cuda_source(), opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => GpuError::Compile {
            arch: arch.into(),
            log: log.to_string_lossy().into_owned(),
        },
        other => GpuError::Compile {
            arch: arch.into(),
            log: format!("{other:?}"),
        },
    })
}

/// Compiles the kernels for every architecture of [`CHECK_ARCHS`] and checks that each PTX
/// defines every listed kernel; returns `(arch, PTX bytes)` per architecture.
pub fn compile_check() -> Result<Vec<(&'static str, usize)>> {
    let names = crate::source::kernel_names();
    let mut out = Vec::new();
    for arch in CHECK_ARCHS {
        let ptx = compile(arch)?.to_src();
        for name in &names {
            if !ptx.contains(&format!(".entry {name}(")) {
                return Err(GpuError::Compile {
                    arch: arch.into(),
                    log: format!("kernel {name} is missing from the PTX"),
                });
            }
        }
        out.push((arch, ptx.len()));
    }
    Ok(out)
}
