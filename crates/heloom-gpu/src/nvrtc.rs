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

/// Virtual architectures CI compiles every kernel for: Turing, Ampere, Hopper (CUDA 13 no longer
/// targets Volta, so compute_75 is the oldest both CUDA 12 and 13 compile for).
pub const CHECK_ARCHS: [&str; 3] = ["compute_75", "compute_80", "compute_90"];

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
    compile_source(&cuda_source(), arch)
}

/// Like [`compile`], with the forward and inverse NTT kernels built for rounds of at most
/// 2^`radix_log.0` and 2^`radix_log.1` words only (see kernels/ntt.cu: fewer registers than
/// with every round size compiled in).
pub fn compile_for_radix(arch: &'static str, radix_log: (u32, u32)) -> Result<Ptx> {
    compile_source(&source_for(Some(radix_log)), arch)
}

/// Every kernel's source, with the NTT round sizes fixed when `radix_log` is given.
fn source_for(radix_log: Option<(u32, u32)>) -> String {
    match radix_log {
        Some((f, i)) => format!(
            "#define HK_NTT_RADIX_LOG_FWD {f}\n#define HK_NTT_RADIX_LOG_INV {i}\n{}",
            cuda_source()
        ),
        None => cuda_source(),
    }
}

/// Compiles CUDA source `src` to PTX for `arch`; errors carry NVRTC's log.
pub fn compile_source(src: &str, arch: &'static str) -> Result<Ptx> {
    load()?;
    let opts = CompileOptions {
        arch: Some(arch),
        // No fused multiply-add anywhere: the base conversion's rounding must match the CPU's.
        fmad: Some(false),
        name: Some("heloom_kernels.cu".into()),
        options: vec!["-default-device".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| match e {
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

/// Real architectures CI assembles machine code for (ptxas through NVRTC): Ampere, Hopper.
pub const CUBIN_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// Compiles every kernel to machine code (CUBIN) for a real architecture such as `sm_90`, which
/// runs ptxas and so catches what PTX alone does not (register or shared-memory limits).
/// Returns the CUBIN's size in bytes.
pub fn compile_cubin(arch: &str) -> Result<usize> {
    compile_cubin_with_log(arch, false, None).map(|(size, _)| size)
}

/// ptxas's report for every kernel on a real architecture (registers, spill stores and loads,
/// shared and constant memory): the static check of the kernels' resource use.
pub fn resource_report(arch: &str) -> Result<String> {
    compile_cubin_with_log(arch, true, None).map(|(_, log)| log)
}

/// [`resource_report`] for the NTT kernels as a GPU build compiles them: rounds of at most
/// 2^`radix_log` words in both directions (see [`compile_for_radix`]).
pub fn resource_report_for_radix(arch: &str, radix_log: u32) -> Result<String> {
    compile_cubin_with_log(arch, true, Some((radix_log, radix_log))).map(|(_, log)| log)
}

fn compile_cubin_with_log(
    arch: &str,
    verbose: bool,
    radix_log: Option<(u32, u32)>,
) -> Result<(usize, String)> {
    use cudarc::nvrtc::{result, sys};
    load()?;
    let fail = |log: String| GpuError::Compile {
        arch: arch.into(),
        log,
    };
    let src = std::ffi::CString::new(source_for(radix_log)).map_err(|e| fail(e.to_string()))?;
    let prog = result::create_program(&src, None).map_err(|e| fail(format!("{e:?}")))?;
    let mut opts = vec![
        format!("-arch={arch}"),
        "--fmad=false".into(),
        "-default-device".into(),
    ];
    if verbose {
        opts.push("--ptxas-options=-v".into());
    }
    let read_log = |prog| -> String {
        // SAFETY: `prog` is live; the log is a NUL-terminated buffer NVRTC filled.
        unsafe { result::get_program_log(prog) }
            .map(|v| {
                let bytes: Vec<u8> = v
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default()
    };
    // SAFETY: `prog` was just created and is destroyed below, after its last use.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    let out = match compiled {
        Err(e) => {
            let log = read_log(prog);
            Err(fail(if log.is_empty() {
                format!("{e:?}")
            } else {
                log
            }))
        }
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: `prog` is live and compiled; NVRTC writes one usize.
            let r = unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) };
            if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                Err(fail(format!("no machine code produced ({r:?})")))
            } else {
                let mut buf = vec![0u8; size];
                // SAFETY: `buf` holds exactly the size NVRTC reported for this program.
                let r = unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) };
                if r != sys::nvrtcResult::NVRTC_SUCCESS || buf.get(..4) != Some(b"\x7fELF") {
                    Err(fail(format!("could not read the machine code ({r:?})")))
                } else {
                    Ok((size, read_log(prog)))
                }
            }
        }
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
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
