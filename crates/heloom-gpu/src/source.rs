//! The CUDA C source of every kernel, as NVRTC compiles it, and the list of kernel names.
//!
//! The same files are compiled for the host by `build.rs` (the emulator), so the source the
//! GPU runs is the source CI checks bit for bit against the CPU backend.

/// CUDA-side definitions the emulator header provides on the host.
const CUDA_PRELUDE: &str = "\
// heloom kernels, assembled for NVRTC.\n\
#define HK_SHARED(T, name) extern __shared__ __align__(16) unsigned char hk_smem_raw[]; \
T* name = reinterpret_cast<T*>(hk_smem_raw)\n";

/// The kernel files in compilation order.
pub const FILES: [(&str, &str); 6] = [
    ("arith.cuh", include_str!("../kernels/arith.cuh")),
    ("ntt.cu", include_str!("../kernels/ntt.cu")),
    ("eltwise.cu", include_str!("../kernels/eltwise.cu")),
    ("rns.cu", include_str!("../kernels/rns.cu")),
    ("keyswitch.cu", include_str!("../kernels/keyswitch.cu")),
    ("naive.cu", include_str!("../kernels/naive.cu")),
];

const LIST: &str = include_str!("../kernels/kernels.list");

/// The whole translation unit NVRTC compiles.
pub fn cuda_source() -> String {
    let mut s = String::from(CUDA_PRELUDE);
    for (name, text) in FILES {
        s.push_str(&format!("// ---- {name} ----\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

/// Every kernel entry point, as listed in `kernels/kernels.list` (word-generic kernels appear
/// once per word size, `_u64` and `_u32`).
pub fn kernel_names() -> Vec<String> {
    let mut out = Vec::new();
    for line in LIST.lines().map(str::trim) {
        if let Some(name) = line
            .strip_prefix("HK_KERNEL_BOTH(")
            .and_then(|r| r.strip_suffix(')'))
        {
            out.push(format!("{name}_u64"));
            out.push(format!("{name}_u32"));
        } else if let Some(name) = line
            .strip_prefix("HK_KERNEL(")
            .and_then(|r| r.strip_suffix(')'))
        {
            out.push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every extern "C" kernel in the source is in the list and vice versa, so the emulator's
    /// table and the GPU module expose the same entry points.
    #[test]
    fn list_matches_source() {
        let src = cuda_source();
        let mut found: Vec<String> = Vec::new();
        for (i, _) in src.match_indices("extern \"C\" __global__ void ") {
            let rest = &src[i + "extern \"C\" __global__ void ".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '#')
                .collect();
            if let Some(base) = name.strip_prefix("NAME##") {
                // The HK_BOTH macro itself: its instances are found through the HK_BOTH uses.
                assert!(base == "_u64" || base == "_u32");
                continue;
            }
            found.push(name);
        }
        for (i, _) in src.match_indices("\nHK_BOTH(") {
            let rest = &src[i + "\nHK_BOTH(".len()..];
            let name: String = rest.chars().take_while(|c| *c != ',').collect();
            found.push(format!("{name}_u64"));
            found.push(format!("{name}_u32"));
        }
        let mut listed = kernel_names();
        found.sort();
        listed.sort();
        assert_eq!(found, listed);
        assert!(listed.len() >= 27);
    }
}
