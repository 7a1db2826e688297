//! `gpu`: AES on CUDA. The device slot is here so specifications, balancers and reports already handle it.
//! heloom's CUDA backend (`heloom-gpu`) runs HE kernels; AES kernels are not part of it yet, so opening the
//! AES device says precisely why it cannot run (HE jobs do run on `gpu`).

use crate::error::DeviceError;

/// Whether an NVIDIA driver is loaded on this machine.
pub fn driver_present() -> bool {
    std::path::Path::new("/proc/driver/nvidia/version").exists()
        || std::path::Path::new("/dev/nvidia0").exists()
}

/// Explains why the `gpu` AES device cannot be opened here.
pub fn unavailable() -> DeviceError {
    if driver_present() {
        DeviceError::Unavailable {
            device: "gpu".into(),
            reason:
                "an NVIDIA driver is present, but heloom's CUDA backend has HE kernels only, no AES kernels yet"
                    .into(),
            hint: "use --devices cpu,soft (or kernel) for AES; `--he --devices cpu-pool,gpu` runs HE jobs on the GPU"
                .into(),
        }
    } else {
        DeviceError::Unavailable {
            device: "gpu".into(),
            reason: "no NVIDIA GPU driver found (/proc/driver/nvidia/version and /dev/nvidia0 are missing)".into(),
            hint: "run on a machine with an NVIDIA GPU and driver, or use --devices cpu,soft".into(),
        }
    }
}
