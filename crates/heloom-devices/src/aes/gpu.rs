//! `gpu`: AES on CUDA. The device slot is here so specifications, balancers and reports already handle it; the
//! kernels arrive with heloom's CUDA backend. Until then opening it says precisely why it cannot run.

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
                "an NVIDIA driver is present, but this build of heloom has no CUDA AES kernels yet"
                    .into(),
            hint: "they land with the CUDA backend; use --devices cpu,soft (or kernel) meanwhile"
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
