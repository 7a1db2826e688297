//! `gpu`: HE jobs on heloom's CUDA backend (`heloom-gpu`), beside the CPU pool in one queue.
//!
//! The device pulls whole jobs like every other device: its worker uploads the job's input,
//! runs every task of the graph on the GPU ([`heloom_gpu::GpuEvaluator`] implements the
//! runtime's `PolyOps`, so intermediates never leave the device), drops the result to level 0
//! and downloads it. Keys are uploaded once, when the device is opened for a workload. Every
//! GPU op is bit-exact with the CPU's, so a job's result does not depend on which device ran it.

use heloom_gpu::{Gpu, GpuContext, GpuEvaluator, GpuKind};

use crate::device::{Device, DeviceInfo, DeviceKind, Worker, Workload};
use crate::error::{DeviceError, Result};
use crate::he::{HeCiphertext, HeJobs};

/// A GPU (or the kernel emulator) running HE jobs.
pub struct GpuHeDevice {
    info: DeviceInfo,
    gpu: Gpu,
}

impl GpuHeDevice {
    /// CUDA device `ordinal`. Errors with [`DeviceError::Unavailable`] saying what is missing
    /// (driver, device, NVRTC) and what to do.
    pub fn cuda(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::cuda(ordinal).map_err(|e| DeviceError::Unavailable {
            device: "gpu".into(),
            reason: e.to_string(),
            hint: "run HE jobs on cpu-pool devices, or on a machine with an NVIDIA GPU and driver"
                .into(),
        })?;
        Ok(Self::on(gpu))
    }

    /// The kernel emulator (the GPU kernels run on host threads): for tests of the device
    /// plumbing on machines without a GPU. Correct, and far slower than any CPU device.
    pub fn emulator() -> Self {
        Self::on(Gpu::emulator())
    }

    fn on(gpu: Gpu) -> Self {
        let i = gpu.info();
        let engine = match i.kind {
            GpuKind::Cuda => format!(
                "heloom CUDA backend on {} (compute {}.{}, {})",
                i.name, i.compute_capability.0, i.compute_capability.1, i.arch
            ),
            GpuKind::Emulator => "heloom CUDA kernels on the host emulator".into(),
        };
        Self {
            info: DeviceInfo {
                name: match i.kind {
                    GpuKind::Cuda => "gpu".into(),
                    GpuKind::Emulator => "gpu-emulator".into(),
                },
                kind: DeviceKind::Gpu,
                workers: 1,
                engine,
                // The emulator burns host cores; a real GPU needs only a feeding thread.
                uses_cpu: i.kind == GpuKind::Emulator,
            },
            gpu,
        }
    }

    /// Renames the device (to tell two devices of one kind apart in a run).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }

    /// The GPU handle.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}

struct GpuHeWorker<'w> {
    work: &'w HeJobs,
    ev: GpuEvaluator<u64>,
    name: &'w str,
}

impl Worker<HeCiphertext> for GpuHeWorker<'_> {
    fn run(&mut self, item: usize) -> Result<HeCiphertext> {
        let fail =
            |what: String| DeviceError::He(format!("device `{}`, job {item}: {what}", self.name));
        let (Some(graph), Some(input)) = (self.work.graph(item), self.work.input(item)) else {
            return Err(DeviceError::InvalidParameter(format!(
                "no job {item}: the workload has {} jobs",
                self.work.len()
            )));
        };
        let g = self.ev.context();
        let gin = g.upload(input).map_err(|e| fail(format!("upload: {e}")))?;
        let out = graph
            .run(&self.ev, &[gin])
            .map_err(|e| fail(format!("graph {}: {e}", graph.name())))?
            .into_iter()
            .next()
            .ok_or_else(|| fail(format!("graph {} has no output", graph.name())))?;
        // Only the lowest limb leaves the device: the download is as small as the result needs.
        let low = g
            .drop_to_level(&out, 0)
            .map_err(|e| fail(format!("dropping the result to level 0: {e}")))?;
        g.download(&low).map_err(|e| fail(format!("download: {e}")))
    }
}

impl Device<HeJobs> for GpuHeDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open<'w>(&'w self, work: &'w HeJobs) -> Result<Vec<Box<dyn Worker<HeCiphertext> + 'w>>> {
        let he = |what: &str, e: heloom_gpu::GpuError| {
            DeviceError::He(format!("device `{}`: {what}: {e}", self.info.name))
        };
        let cpu = work.workload().evaluator();
        let keys = cpu.evaluation_keys().ok_or_else(|| {
            DeviceError::He("the HE workload's evaluator has no evaluation keys".into())
        })?;
        let g = GpuContext::new(&self.gpu, work.workload().context())
            .map_err(|e| he("uploading the parameters' tables", e))?;
        let ev = GpuEvaluator::new(&g, keys).map_err(|e| he("uploading the keys", e))?;
        Ok(vec![Box::new(GpuHeWorker {
            work,
            ev,
            name: &self.info.name,
        })])
    }
}
