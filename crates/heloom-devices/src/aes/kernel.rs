//! (in progress)
use super::AesWorkload;
use crate::device::{Device, DeviceInfo, Worker};
use crate::error::{DeviceError, Result};
/// Kernel device (in progress).
pub struct KernelDevice {
    info: DeviceInfo,
}
impl KernelDevice {
    /// New.
    pub fn new(_w: usize) -> Result<Self> {
        Err(DeviceError::InvalidParameter("in progress".into()))
    }
    /// Rename.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }
}
impl Device<AesWorkload> for KernelDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn open<'w>(&'w self, _work: &'w AesWorkload) -> Result<Vec<Box<dyn Worker<Vec<u8>> + 'w>>> {
        Ok(vec![])
    }
}
