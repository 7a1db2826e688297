//! Device specifications such as `cpu:1,soft` and opening them.

use serde::Serialize;

use crate::aes::{cpu::CpuDevice, soft::SoftDevice, AesWorkload};
use crate::device::{Device, DeviceKind};
use crate::error::{DeviceError, Result};

/// One entry of a device list: a kind and how many workers (threads or hardware queues) it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceSpec {
    /// Engine kind.
    pub kind: DeviceKind,
    /// Workers; `None` means the default for the kind.
    pub workers: Option<usize>,
}

impl DeviceSpec {
    /// Parses a comma-separated list like `cpu:2,soft,kernel:1`.
    pub fn parse_list(spec: &str) -> Result<Vec<DeviceSpec>> {
        let bad = |reason: String| DeviceError::BadSpec {
            spec: spec.to_string(),
            reason,
        };
        let mut out = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, workers) = match part.split_once(':') {
                Some((n, w)) => {
                    let w: usize = w
                        .parse()
                        .map_err(|_| bad(format!("`{w}` is not a thread count")))?;
                    if w == 0 || w > 1024 {
                        return Err(bad(format!("{w} workers for `{n}`; use 1..=1024")));
                    }
                    (n, Some(w))
                }
                None => (part, None),
            };
            let kind = match name.to_ascii_lowercase().as_str() {
                "cpu" => DeviceKind::Cpu,
                "soft" => DeviceKind::Soft,
                "kernel" | "af_alg" => DeviceKind::Kernel,
                "gpu" | "cuda" => DeviceKind::Gpu,
                "cpu-pool" | "pool" => DeviceKind::CpuPool,
                other => return Err(bad(format!("unknown device `{other}`"))),
            };
            out.push(DeviceSpec { kind, workers });
        }
        if out.is_empty() {
            return Err(bad("no devices listed".into()));
        }
        Ok(out)
    }
}

/// Default worker counts: every device but the GPU runs on CPU cores (the kernel's too, when no hardware module
/// exists), so those without an explicit count share the cores left equally, at least one each.
pub(crate) fn default_workers(specs: &[DeviceSpec], kind: DeviceKind) -> usize {
    let cores = heloom_pool::cores().max(1);
    let cpu_bound = specs
        .iter()
        .filter(|s| s.workers.is_none() && s.kind != DeviceKind::Gpu)
        .count()
        .max(1);
    let fixed: usize = specs.iter().filter_map(|s| s.workers).sum();
    match kind {
        DeviceKind::Gpu => 1,
        _ => (cores.saturating_sub(fixed) / cpu_bound).max(1),
    }
}

/// Device names for a list: `kind:workers`, with `#2`, `#3`, ... appended to repeats so every name is unique.
pub fn device_names(specs: &[DeviceSpec]) -> Vec<String> {
    let base: Vec<String> = specs
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s.kind.name(),
                s.workers.unwrap_or_else(|| default_workers(specs, s.kind))
            )
        })
        .collect();
    base.iter()
        .enumerate()
        .map(|(i, b)| {
            let before = base[..i].iter().filter(|x| *x == b).count();
            if before == 0 {
                b.clone()
            } else {
                format!("{b}#{}", before + 1)
            }
        })
        .collect()
}

/// Opens AES devices for a specification list, with clear errors for those this machine lacks.
pub fn open_aes_devices(specs: &[DeviceSpec]) -> Result<Vec<Box<dyn Device<AesWorkload>>>> {
    let names = device_names(specs);
    let mut out: Vec<Box<dyn Device<AesWorkload>>> = Vec::new();
    for (s, name) in specs.iter().zip(names) {
        let w = s.workers.unwrap_or_else(|| default_workers(specs, s.kind));
        let dev: Box<dyn Device<AesWorkload>> = match s.kind {
            DeviceKind::Cpu => Box::new(CpuDevice::new(w)?.with_name(name)),
            DeviceKind::Soft => Box::new(SoftDevice::new(w)?.with_name(name)),
            DeviceKind::Kernel => open_kernel(w, name)?,
            DeviceKind::Gpu => return Err(crate::aes::gpu::unavailable()),
            DeviceKind::CpuPool => {
                return Err(DeviceError::BadSpec {
                    spec: "cpu-pool".into(),
                    reason: "cpu-pool devices run HE jobs, not AES".into(),
                })
            }
        };
        out.push(dev);
    }
    Ok(out)
}

#[cfg(target_os = "linux")]
fn open_kernel(workers: usize, name: String) -> Result<Box<dyn Device<AesWorkload>>> {
    Ok(Box::new(
        crate::aes::kernel::KernelDevice::new(workers)?.with_name(name),
    ))
}

#[cfg(not(target_os = "linux"))]
fn open_kernel(_workers: usize, _name: String) -> Result<Box<dyn Device<AesWorkload>>> {
    Err(DeviceError::Unavailable {
        device: "kernel".into(),
        reason: "the kernel crypto API (AF_ALG) exists only on Linux".into(),
        hint: "use --devices cpu,soft".into(),
    })
}
