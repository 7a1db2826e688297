//! The GPU handle: a CUDA device (driver + NVRTC-compiled module, one stream) or the host
//! emulator of the same kernels; device buffers with a size-class memory pool; kernel launch.
//!
//! Kernel arguments are passed as 64-bit slots (device addresses and integers): CUDA copies
//! each parameter's own size from its slot, so a `u32` parameter reads the low half.

use crate::context::Tiles;
use crate::error::{GpuError, Result};
use crate::word::GpuWord;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

/// Per-limb constants passed to a kernel by value (the `HkScalars` parameter of
/// kernels/eltwise.cu): `v[2l]`, `v[2l + 1]` for limb `l`, up to 64 limbs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScalarPack {
    pub v: [u64; 128],
}

/// Limbs a [`ScalarPack`] holds.
pub(crate) const MAX_SCALAR_LIMBS: usize = 64;

// SAFETY: a plain array of u64 with C layout, the same as the kernels' `HkScalars`.
unsafe impl cudarc::driver::DeviceRepr for ScalarPack {}

/// Which engine runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKind {
    /// An NVIDIA GPU through the CUDA driver.
    Cuda,
    /// The host emulator: the same kernel source compiled for the CPU, for verification only.
    Emulator,
}

/// What the device is and how it was set up.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Engine.
    pub kind: GpuKind,
    /// Device name ("NVIDIA H200", or "host emulator").
    pub name: String,
    /// Compute capability (0, 0 for the emulator).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes (0 when unknown).
    pub total_memory: usize,
    /// Streaming multiprocessors (0 for the emulator).
    pub multiprocessors: u32,
    /// Architecture the kernels were compiled for.
    pub arch: String,
    /// Where NVRTC was loaded from.
    pub nvrtc: String,
}

/// Memory-pool counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryStats {
    /// Allocations served by the device allocator.
    pub fresh_allocations: u64,
    /// Allocations served from the pool.
    pub reused: u64,
    /// Bytes held by live buffers now.
    pub live_bytes: usize,
    /// Most bytes live at once.
    pub peak_live_bytes: usize,
    /// Bytes kept in the pool for reuse.
    pub pooled_bytes: usize,
}

/// Host memory of the emulator: cells the kernels write through raw addresses.
struct HostMem(Box<[UnsafeCell<u64>]>);

// SAFETY: the cells are only touched by kernel launches and copies, which the `Gpu` serializes
// under its launch lock (the emulator's "stream"), never concurrently.
unsafe impl Send for HostMem {}
// SAFETY: as above; shared references only hand out the address.
unsafe impl Sync for HostMem {}

enum Mem {
    Cuda(CudaSlice<u8>),
    Host(HostMem),
}

struct CudaEngine {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    funcs: HashMap<String, CudaFunction>,
}

enum Engine {
    Cuda(CudaEngine),
    Emulator,
}

struct Pool {
    free: HashMap<usize, Vec<Mem>>,
    stats: MemoryStats,
    limit: usize,
}

pub(crate) struct Inner {
    engine: Engine,
    info: GpuInfo,
    pool: Mutex<Pool>,
    /// Serializes launches and copies (the emulator runs them synchronously; CUDA work goes to
    /// one stream in order either way).
    launch: Mutex<()>,
    /// Tile sizes and block size of the NTT launches (see [`NttShape`]); a lock, so that a
    /// tuning run can try several shapes on one compiled module.
    ntt_shape: Mutex<NttShape>,
    /// log2 of the largest NTT tile of 64-bit words a block may keep (13 where the driver let
    /// the NTT kernels have 64 KiB of shared memory, else 12).
    max_tile_log: u32,
    /// log2 of the most words a thread transforms in registers per NTT round, forward and
    /// inverse (see [`NTT_RADIX_ENV`]).
    ntt_radix_log: RadixLog,
}

/// Environment variable that sets the NTT kernels' largest radix per round: 4, 8 or 16 (two,
/// three or four layers per round in registers) for both directions, or `F,I` for the forward
/// and the inverse kernels separately (default [`DEFAULT_NTT_RADIX`]). All are bit-exact; a
/// tuning knob for measuring.
pub const NTT_RADIX_ENV: &str = "HELOOM_GPU_NTT_RADIX";

/// Default largest NTT radix per round, forward and inverse. Forward: 8 words a thread, two
/// thirds of the rounds (shared-memory passes, barriers, index arithmetic) of radix 4 at about
/// 64 registers a thread for 64-bit words. Inverse: 4, because its radix-8 round needs 72
/// registers, which leaves 3 blocks per SM and made its second phase slower (Nsight Compute on
/// an H100: 60 us at radix 8, 49 us at radix 4; bench/gpu/NOTES.md).
pub const DEFAULT_NTT_RADIX: (u32, u32) = (8, 4);

/// log2 of the forward and inverse NTT radices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RadixLog {
    fwd: u32,
    inv: u32,
}

impl RadixLog {
    fn default_setting() -> Self {
        Self {
            fwd: DEFAULT_NTT_RADIX.0.trailing_zeros(),
            inv: DEFAULT_NTT_RADIX.1.trailing_zeros(),
        }
    }

    /// The kernels' `radix_log` argument: forward in bits 0-7, inverse in bits 8-15.
    pub(crate) fn packed(self) -> u32 {
        self.fwd | (self.inv << 8)
    }
}

/// log2 of an NTT radix heloom has rounds for (4, 8 or 16).
fn radix_log_of(radix: u32) -> Option<u32> {
    matches!(radix, 4 | 8 | 16).then(|| radix.trailing_zeros())
}

/// [`NTT_RADIX_ENV`] if set, else the default; an invalid value is an error that says so.
fn ntt_radix_setting() -> Result<RadixLog> {
    parse_ntt_radix(std::env::var(NTT_RADIX_ENV).ok().as_deref())
}

fn parse_ntt_radix(v: Option<&str>) -> Result<RadixLog> {
    let Some(v) = v else {
        return Ok(RadixLog::default_setting());
    };
    let one = |s: &str| s.trim().parse::<u32>().ok().and_then(radix_log_of);
    let parsed = match v.split_once(',') {
        None => one(v).map(|r| RadixLog { fwd: r, inv: r }),
        Some((f, i)) => one(f).zip(one(i)).map(|(fwd, inv)| RadixLog { fwd, inv }),
    };
    parsed.ok_or_else(|| {
        GpuError::Invalid(format!(
            "{NTT_RADIX_ENV}={v:?} is not 4, 8 or 16 (both directions) or F,I with F and I \
             each 4, 8 or 16 (forward, inverse); unset it for the default ({},{})",
            DEFAULT_NTT_RADIX.0, DEFAULT_NTT_RADIX.1
        ))
    })
}

/// A handle to one GPU (or the emulator). Cheap to clone; buffers keep it alive.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.inner.info)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn driver_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |e| GpuError::Driver {
        what,
        msg: e.to_string(),
    }
}

/// Whether a CUDA driver library can be loaded (says nothing about devices).
pub fn driver_present() -> bool {
    // SAFETY: probes for libcuda with dlopen; no symbol of it is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Environment variable that sets the most threads per block of the NTT kernels (a power of
/// two from 32 to 1024; default [`DEFAULT_NTT_THREADS`]): a tuning knob for measuring, since
/// the kernels are correct with any block size.
pub const NTT_THREADS_ENV: &str = "HELOOM_GPU_NTT_THREADS";

/// Default most threads per block of an NTT launch. A tile of 4,096 words with 512 threads
/// leaves 3 blocks per multiprocessor on an H100 (40 registers a thread), so 30 limbs of 2^16
/// (480 tiles) take two waves, the second a fifth full; with 256 threads 6 blocks fit and the
/// launch is one wave.
pub const DEFAULT_NTT_THREADS: u32 = 256;

/// log2 of the tile of every phase of a large NTT launch with automatic tiles: 1,024 words.
/// Measured on an H100 over 168 shapes (examples/ntt_sweep, bench/gpu/NOTES.md): at
/// 2^16 x 30 limbs tiles of 2^10 words in 128-thread blocks (one radix-8 group a thread) took
/// the forward NTT from 61.3 to 57.4 us and relinearization from 827 to 801 us, while at
/// 2^15 x 15 and 2^14 x 8 (few blocks) the larger default tiles stayed best.
pub const LARGE_NTT_TILE_LOG: u32 = 10;

/// Threads per block of a large NTT launch with automatic tiles (see [`LARGE_NTT_TILE_LOG`]).
pub const LARGE_NTT_THREADS: u32 = 128;

/// A launch is large when tiles of 2^[`LARGE_NTT_TILE_LOG`] words give at least this many
/// blocks per multiprocessor (2^16 x 30 limbs: 1,920 blocks, 14.5 per SM of an H100).
pub const LARGE_NTT_BLOCKS_PER_SM: u64 = 8;

/// Environment variable that sets the NTT tiles: `B`, `B,U` or `B,U,R`, the log2 of the largest
/// tile of the phase with bit 0 (`B`), of the phases above it (`U`, default `B`) and of the
/// fewest consecutive words in a row of an upper phase's tile (`R`, default 4); see
/// [`NttShape`]. A tuning knob for measuring: every shape is bit-exact.
pub const NTT_TILE_ENV: &str = "HELOOM_GPU_NTT_TILE";

/// How the NTT launches are cut: tile sizes and threads per block. Every shape gives the same
/// words; the shape only moves time between shared-memory rounds, launches and occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttShape {
    /// log2 of the largest tile (words in shared memory) of the phase that holds bit 0, 6 to 13;
    /// the GPU shrinks it for small transforms while that keeps the number of launches. `None`:
    /// on a GPU, [`LARGE_NTT_TILE_LOG`] in every phase for launches of at least
    /// [`LARGE_NTT_BLOCKS_PER_SM`] such tiles per multiprocessor, else 12 (4,096 words, 32 KiB
    /// of 64-bit words); 6 on the emulator.
    pub tile_log: Option<u32>,
    /// log2 of the largest tile of the phases above bit 0's (6 to 13); `None`: the same as the
    /// phase of bit 0. Smaller upper tiles give that phase more, smaller blocks.
    pub upper_tile_log: Option<u32>,
    /// log2 of the fewest consecutive words a row of an upper phase's tile has (0 to 6; default
    /// 4: 16 words, 128 bytes of 64-bit words, whole cache lines).
    pub run_log: u32,
    /// Most threads per block, a power of two from 32 to 1024; a block never has more than
    /// half its tile's words. `None`: [`DEFAULT_NTT_THREADS`], or [`LARGE_NTT_THREADS`] for the
    /// large launches of automatic tiles (see [`NttShape::tile_log`]).
    pub threads: Option<u32>,
}

impl Default for NttShape {
    fn default() -> Self {
        Self {
            tile_log: None,
            upper_tile_log: None,
            run_log: 4,
            threads: None,
        }
    }
}

impl NttShape {
    /// Checks the ranges, for a device whose largest tile is 2^`max_tile_log` words.
    fn check(&self, max_tile_log: u32) -> Result<()> {
        let tile_ok = |t: Option<u32>| t.is_none_or(|t| (6..=max_tile_log).contains(&t));
        if !tile_ok(self.tile_log) || !tile_ok(self.upper_tile_log) {
            return Err(GpuError::Invalid(format!(
                "NTT tiles of 2^{:?} / 2^{:?} words: each must be 2^6 to 2^{max_tile_log} on this \
                 device",
                self.tile_log, self.upper_tile_log
            )));
        }
        if self.run_log > 6 {
            return Err(GpuError::Invalid(format!(
                "NTT rows of 2^{} consecutive words: use 2^0 to 2^6",
                self.run_log
            )));
        }
        if !self
            .threads
            .is_none_or(|t| t.is_power_of_two() && (32..=1024).contains(&t))
        {
            return Err(GpuError::Invalid(format!(
                "{:?} threads per NTT block: use a power of two from 32 to 1024",
                self.threads
            )));
        }
        Ok(())
    }
}

/// [`NTT_THREADS_ENV`] and [`NTT_TILE_ENV`] if set, else the defaults; an invalid value is an
/// error that says so.
fn ntt_shape_setting() -> Result<NttShape> {
    let threads = ntt_threads_setting()?;
    let tiles = parse_ntt_tile(std::env::var(NTT_TILE_ENV).ok().as_deref())?;
    Ok(NttShape { threads, ..tiles })
}

fn parse_ntt_tile(v: Option<&str>) -> Result<NttShape> {
    let Some(v) = v else {
        return Ok(NttShape::default());
    };
    let bad = || {
        GpuError::Invalid(format!(
            "{NTT_TILE_ENV}={v:?} is not B, B,U or B,U,R (log2 of the base tile, 6 to 13; of the \
             upper phases' tile, 6 to 13; of the consecutive words per row, 0 to 6); unset it \
             for the default"
        ))
    };
    let parts: Vec<u32> = v
        .split(',')
        .map(|p| p.trim().parse::<u32>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad())?;
    let shape = match parts[..] {
        [b] => NttShape {
            tile_log: Some(b),
            ..NttShape::default()
        },
        [b, u] => NttShape {
            tile_log: Some(b),
            upper_tile_log: Some(u),
            ..NttShape::default()
        },
        [b, u, r] => NttShape {
            tile_log: Some(b),
            upper_tile_log: Some(u),
            run_log: r,
            ..NttShape::default()
        },
        _ => return Err(bad()),
    };
    shape.check(13).map_err(|_| bad())?;
    Ok(shape)
}

/// [`NTT_THREADS_ENV`] if set, else the default; an invalid value is an error that says so.
fn ntt_threads_setting() -> Result<Option<u32>> {
    parse_ntt_threads(std::env::var(NTT_THREADS_ENV).ok().as_deref())
}

fn parse_ntt_threads(v: Option<&str>) -> Result<Option<u32>> {
    match v {
        None => Ok(None),
        Some(v) => match v.trim().parse::<u32>() {
            Ok(t) if t.is_power_of_two() && (32..=1024).contains(&t) => Ok(Some(t)),
            _ => Err(GpuError::Invalid(format!(
                "{NTT_THREADS_ENV}={v:?} is not a power of two from 32 to 1024; unset it for \
                 the default ({DEFAULT_NTT_THREADS})"
            ))),
        },
    }
}

impl Gpu {
    /// Opens CUDA device `ordinal`: loads the driver, compiles every kernel with NVRTC for the
    /// device's architecture and loads the module. Errors ([`GpuError::Unavailable`],
    /// [`GpuError::NvrtcMissing`], [`GpuError::Compile`]) say what is missing.
    pub fn cuda(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(GpuError::Unavailable(
                "no CUDA driver (libcuda.so) on this machine; heloom's GPU backend needs an NVIDIA \
                 GPU with its driver"
                    .into(),
            ));
        }
        let count = CudaContext::device_count().map_err(|e| {
            GpuError::Unavailable(format!("the CUDA driver reports no usable device ({e})"))
        })?;
        if ordinal >= count.max(0) as usize {
            return Err(GpuError::Unavailable(format!(
                "CUDA device {ordinal} does not exist ({count} device(s) found)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver_err("opening the device"))?;
        // SAFETY: every allocation, copy and launch of this handle goes to the context's one
        // default stream, whose order already serializes them; per-buffer events would only
        // add driver calls to every allocation.
        unsafe { ctx.disable_event_tracking() };
        let cc = ctx
            .compute_capability()
            .map_err(driver_err("reading the compute capability"))?;
        let name = ctx.name().map_err(driver_err("reading the device name"))?;
        let total = ctx.total_mem().unwrap_or(0);
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .unwrap_or(0)
            .max(0) as u32;
        let ntt_shape = ntt_shape_setting()?;
        let ntt_radix_log = ntt_radix_setting()?;
        let nvrtc = crate::nvrtc::load()?;
        let arch = arch_for(cc);
        let ptx = crate::nvrtc::compile_for_radix(arch, (ntt_radix_log.fwd, ntt_radix_log.inv))?;
        let module = ctx
            .load_module(ptx)
            .map_err(driver_err("loading the kernel module"))?;
        let mut funcs = HashMap::new();
        let mut max_tile_log = 13;
        for k in crate::source::kernel_names() {
            let f = module
                .load_function(&k)
                .map_err(driver_err("looking up a kernel"))?;
            if k.starts_with("hk_ntt") {
                // Shared-memory tiles: prefer the largest shared-memory carveout, so that as
                // many blocks fit per multiprocessor as registers and threads allow. A hint:
                // a driver that refuses it keeps its own choice.
                let _ = f.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    100,
                );
                // Tiles of 8,192 64-bit words need 64 KiB, above the 48 KiB a launch gets
                // without asking; where the driver refuses, tiles stop at 4,096 words.
                if f.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    64 * 1024,
                )
                .is_err()
                {
                    max_tile_log = 12;
                }
            }
            funcs.insert(k, f);
        }
        let stream = ctx.default_stream();
        Ok(Self::from_engine(
            Engine::Cuda(CudaEngine {
                _ctx: ctx,
                stream,
                funcs,
            }),
            GpuInfo {
                kind: GpuKind::Cuda,
                name,
                compute_capability: cc,
                total_memory: total,
                multiprocessors: sms,
                arch: arch.into(),
                nvrtc,
            },
            total / 4,
            (ntt_shape, ntt_radix_log, max_tile_log),
        ))
    }

    /// The host emulator: the same kernels compiled for the CPU, one OS thread per GPU thread
    /// of a (small) block. Bit-exact with the GPU by construction and slow by design; for
    /// tests and CI, which have no GPU. Its NTT radix is [`NTT_RADIX_ENV`]'s (the default when
    /// unset or invalid).
    pub fn emulator() -> Self {
        Self::emulator_radix_log(ntt_radix_setting().unwrap_or(RadixLog::default_setting()))
    }

    /// The host emulator with forward NTT rounds of at most `fwd` words and inverse rounds of
    /// at most `inv` (each 4, 8 or 16, as [`NTT_RADIX_ENV`] sets for a GPU), so that tests
    /// check every round size.
    pub fn emulator_with_ntt_radix(fwd: u32, inv: u32) -> Result<Self> {
        let log = |radix: u32| {
            radix_log_of(radix).ok_or_else(|| {
                GpuError::Invalid(format!("NTT radix {radix} does not exist: use 4, 8 or 16"))
            })
        };
        Ok(Self::emulator_radix_log(RadixLog {
            fwd: log(fwd)?,
            inv: log(inv)?,
        }))
    }

    fn emulator_radix_log(ntt_radix_log: RadixLog) -> Self {
        Self::from_engine(
            Engine::Emulator,
            GpuInfo {
                kind: GpuKind::Emulator,
                name: "host emulator".into(),
                compute_capability: (0, 0),
                total_memory: 0,
                multiprocessors: 0,
                arch: "host".into(),
                nvrtc: "not used".into(),
            },
            1 << 30,
            (NttShape::default(), ntt_radix_log, 13),
        )
    }

    fn from_engine(
        engine: Engine,
        info: GpuInfo,
        limit: usize,
        ntt: (NttShape, RadixLog, u32),
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                engine,
                info,
                pool: Mutex::new(Pool {
                    free: HashMap::new(),
                    stats: MemoryStats::default(),
                    limit,
                }),
                launch: Mutex::new(()),
                ntt_shape: Mutex::new(ntt.0),
                max_tile_log: ntt.2,
                ntt_radix_log: ntt.1,
            }),
        }
    }

    /// Whether two handles are the same device (buffers of one cannot be used on the other).
    pub fn same_device(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// What this device is.
    pub fn info(&self) -> &GpuInfo {
        &self.inner.info
    }

    /// The engine kind.
    pub fn kind(&self) -> GpuKind {
        self.inner.info.kind
    }

    /// Memory-pool counters.
    pub fn memory_stats(&self) -> MemoryStats {
        lock(&self.inner.pool).stats
    }

    /// Threads per block for a kernel that wants `want`: the emulator runs few OS threads.
    pub(crate) fn block(&self, want: u32) -> u32 {
        match self.inner.engine {
            Engine::Cuda(_) => want.clamp(1, 1024),
            Engine::Emulator => want.clamp(1, 4),
        }
    }

    /// Threads per block of an NTT launch over tiles of 2^`tile_log` words (two words a
    /// thread per radix-2 layer at most, `threads` at most).
    pub(crate) fn ntt_block(&self, tile_log: u32, threads: u32) -> u32 {
        self.block(((1u32 << tile_log) / 2).min(threads))
    }

    /// The NTT launch shape in use ([`NTT_TILE_ENV`] and [`NTT_THREADS_ENV`] when the device
    /// was opened, or the last [`Gpu::set_ntt_shape`]).
    pub fn ntt_shape(&self) -> NttShape {
        *lock(&self.inner.ntt_shape)
    }

    /// Sets how later NTT launches are cut (a tuning knob: every shape is bit-exact). Errors
    /// when a size is out of range; tiles of 2^13 words need a GPU that grants 64 KiB of
    /// shared memory per block.
    pub fn set_ntt_shape(&self, shape: NttShape) -> Result<()> {
        shape.check(self.inner.max_tile_log)?;
        *lock(&self.inner.ntt_shape) = shape;
        Ok(())
    }

    /// The NTT kernels' `radix_log` argument: log2 of the largest radix a forward and an
    /// inverse round use ([`NTT_RADIX_ENV`]), packed.
    pub(crate) fn ntt_radix_arg(&self) -> u32 {
        self.inner.ntt_radix_log.packed()
    }

    /// Blocks for a grid-stride kernel over `count` items with blocks of `block` threads.
    pub(crate) fn grid_for(&self, count: u64, block: u32) -> u32 {
        match self.inner.engine {
            Engine::Cuda(_) => count.div_ceil(block as u64).clamp(1, 1 << 20) as u32,
            Engine::Emulator => 1,
        }
    }

    /// The NTT tiles for a launch over `rows` limbs of 2^`log_n` words (see [`NttShape`]): on a
    /// GPU the base tile is at most 4096 words (32 KiB of u64) or the shape's, smaller when that
    /// would leave fewer than two blocks per multiprocessor (small rings, few limbs) as long as
    /// the transform keeps its number of phases (a launch more costs more than the idle
    /// multiprocessors). The emulator uses small tiles so that tests run the multi-phase code
    /// paths.
    pub(crate) fn ntt_tiles(&self, log_n: u32, rows: u32) -> Tiles {
        let shape = self.ntt_shape();
        let sms = u64::from(self.inner.info.multiprocessors.max(1));
        let large = matches!(self.inner.engine, Engine::Cuda(_))
            && shape.tile_log.is_none()
            && log_n >= LARGE_NTT_TILE_LOG
            && (1u64 << (log_n - LARGE_NTT_TILE_LOG)) * u64::from(rows)
                >= LARGE_NTT_BLOCKS_PER_SM * sms;
        let base = match self.inner.engine {
            Engine::Cuda(_) if large => LARGE_NTT_TILE_LOG,
            Engine::Cuda(_) => cuda_tile_log(
                log_n,
                rows,
                self.inner.info.multiprocessors,
                shape.tile_log.unwrap_or(12),
            ),
            Engine::Emulator => shape.tile_log.unwrap_or(6),
        };
        let auto_threads = if large {
            LARGE_NTT_THREADS
        } else {
            DEFAULT_NTT_THREADS
        };
        Tiles {
            base,
            upper: shape.upper_tile_log.unwrap_or(base),
            run: shape.run_log,
            threads: shape.threads.unwrap_or(auto_threads),
        }
    }

    /// Into how many groups a base conversion of `rows` coefficients to `m` primes splits its
    /// target primes (one thread per coefficient and group): on a GPU enough for about two
    /// full waves of threads, at most `m`; on the emulator 3 (or `m`), so that tests run the
    /// uneven last group.
    pub(crate) fn conversion_groups(&self, rows: u64, m: u64) -> u64 {
        let m = m.max(1);
        match self.inner.engine {
            Engine::Cuda(_) => {
                let want = 2 * 2048 * u64::from(self.inner.info.multiprocessors.max(1));
                want.div_ceil(rows.max(1)).clamp(1, m)
            }
            Engine::Emulator => m.min(3),
        }
    }

    /// Waits until all queued work is done.
    pub fn synchronize(&self) -> Result<()> {
        if let Engine::Cuda(c) = &self.inner.engine {
            c.stream
                .synchronize()
                .map_err(driver_err("synchronizing"))?;
        }
        Ok(())
    }

    fn take(&self, bytes: usize) -> Result<Mem> {
        let bytes = bytes.max(8);
        {
            let mut pool = lock(&self.inner.pool);
            let reuse = pool.free.get_mut(&bytes).and_then(Vec::pop);
            if let Some(m) = reuse {
                pool.stats.reused += 1;
                pool.stats.pooled_bytes -= bytes;
                pool.stats.live_bytes += bytes;
                pool.stats.peak_live_bytes = pool.stats.peak_live_bytes.max(pool.stats.live_bytes);
                return Ok(m);
            }
        }
        let mem = match &self.inner.engine {
            Engine::Cuda(c) => {
                let fresh = c.stream.alloc_zeros::<u8>(bytes);
                let fresh = match fresh {
                    Ok(m) => m,
                    Err(_) => {
                        // Out of memory: give the pool back to the driver and try once more.
                        lock(&self.inner.pool).free.clear();
                        let mut pool = lock(&self.inner.pool);
                        pool.stats.pooled_bytes = 0;
                        drop(pool);
                        c.stream
                            .alloc_zeros::<u8>(bytes)
                            .map_err(driver_err("allocating device memory"))?
                    }
                };
                Mem::Cuda(fresh)
            }
            Engine::Emulator => Mem::Host(HostMem(
                (0..bytes.div_ceil(8)).map(|_| UnsafeCell::new(0)).collect(),
            )),
        };
        let mut pool = lock(&self.inner.pool);
        pool.stats.fresh_allocations += 1;
        pool.stats.live_bytes += bytes;
        pool.stats.peak_live_bytes = pool.stats.peak_live_bytes.max(pool.stats.live_bytes);
        Ok(mem)
    }

    /// A buffer of `len` words with unspecified contents (every kernel writes all of its
    /// output).
    pub fn alloc<W: GpuWord>(&self, len: usize) -> Result<GpuBuffer<W>> {
        let mem = self.take(len * W::BYTES)?;
        Ok(GpuBuffer {
            mem: Some(mem),
            len,
            gpu: self.clone(),
            _w: PhantomData,
        })
    }

    /// A zero-filled buffer of `len` words.
    pub fn zeros<W: GpuWord>(&self, len: usize) -> Result<GpuBuffer<W>> {
        let mut b = self.alloc::<W>(len)?;
        self.fill_zero(&mut b)?;
        Ok(b)
    }

    fn fill_zero<W: GpuWord>(&self, b: &mut GpuBuffer<W>) -> Result<()> {
        let _g = lock(&self.inner.launch);
        let bytes = b.len * W::BYTES;
        match (&self.inner.engine, b.mem.as_mut()) {
            (Engine::Cuda(c), Some(Mem::Cuda(s))) => {
                let mut view = s.slice_mut(0..bytes);
                c.stream
                    .memset_zeros(&mut view)
                    .map_err(driver_err("clearing device memory"))
            }
            (Engine::Emulator, Some(Mem::Host(h))) => {
                for c in h.0.iter_mut() {
                    *c.get_mut() = 0;
                }
                Ok(())
            }
            _ => Err(GpuError::Mismatch("buffer of another engine".into())),
        }
    }

    /// Copies host words to a new device buffer.
    pub fn upload<W: GpuWord>(&self, data: &[W]) -> Result<GpuBuffer<W>> {
        let mut b = self.alloc::<W>(data.len())?;
        self.write(&mut b, 0, data)?;
        Ok(b)
    }

    /// Writes `data` into `b` from word `offset`.
    pub fn write<W: GpuWord>(&self, b: &mut GpuBuffer<W>, offset: usize, data: &[W]) -> Result<()> {
        if offset + data.len() > b.len {
            return Err(GpuError::Mismatch(format!(
                "write of {} words at {offset} into a buffer of {}",
                data.len(),
                b.len
            )));
        }
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let start = offset * W::BYTES;
        let _g = lock(&self.inner.launch);
        match (&self.inner.engine, b.mem.as_mut()) {
            (Engine::Cuda(c), Some(Mem::Cuda(s))) => {
                let mut view = s.slice_mut(start..start + bytes.len());
                c.stream
                    .memcpy_htod(bytes, &mut view)
                    .map_err(driver_err("copying to the device"))
            }
            (Engine::Emulator, Some(Mem::Host(h))) => {
                let dst = h.0.as_ptr() as *mut u8;
                // SAFETY: `start + bytes.len()` is within the allocation (checked above; it has
                // at least len * BYTES bytes); no kernel runs concurrently (launch lock held).
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(start), bytes.len())
                };
                Ok(())
            }
            _ => Err(GpuError::Mismatch("buffer of another engine".into())),
        }
    }

    /// Copies a device buffer back to the host (waits for queued work).
    pub fn download<W: GpuWord>(&self, b: &GpuBuffer<W>) -> Result<Vec<W>> {
        let mut out = vec![W::default(); b.len];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let _g = lock(&self.inner.launch);
        match (&self.inner.engine, b.mem.as_ref()) {
            (Engine::Cuda(c), Some(Mem::Cuda(s))) => {
                let view = s.slice(0..bytes.len());
                c.stream
                    .memcpy_dtoh(&view, bytes)
                    .map_err(driver_err("copying from the device"))?;
                c.stream
                    .synchronize()
                    .map_err(driver_err("synchronizing"))?;
            }
            (Engine::Emulator, Some(Mem::Host(h))) => {
                let src = h.0.as_ptr() as *const u8;
                // SAFETY: the allocation holds at least `bytes.len()` bytes; no kernel runs
                // concurrently (launch lock held).
                unsafe { std::ptr::copy_nonoverlapping(src, bytes.as_mut_ptr(), bytes.len()) };
            }
            _ => return Err(GpuError::Mismatch("buffer of another engine".into())),
        }
        Ok(out)
    }

    /// Device-to-device copy of `len` words.
    pub fn copy<W: GpuWord>(
        &self,
        dst: &mut GpuBuffer<W>,
        dst_off: usize,
        src: &GpuBuffer<W>,
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        if dst_off + len > dst.len || src_off + len > src.len {
            return Err(GpuError::Mismatch("copy out of bounds".into()));
        }
        let (d, s) = (dst.addr(dst_off), src.addr(src_off));
        let bytes = len * W::BYTES;
        let _g = lock(&self.inner.launch);
        match &self.inner.engine {
            Engine::Cuda(c) => {
                // SAFETY: both ranges lie inside live allocations of this context (bounds
                // checked above; the buffers are borrowed for the call and freed only in
                // stream order).
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(d, s, bytes, c.stream.cu_stream())
                }
                .map_err(driver_err("copying on the device"))
            }
            Engine::Emulator => {
                // SAFETY: in-bounds ranges of two host allocations (checked above); `dst` is
                // borrowed mutably, so the ranges do not overlap unless both are the same
                // buffer, which the borrow rules forbid.
                unsafe {
                    std::ptr::copy_nonoverlapping(s as *const u8, d as *mut u8, bytes);
                }
                Ok(())
            }
        }
    }

    /// Launches kernel `name` on a `grid` of blocks of `block` threads with `smem` bytes of
    /// dynamic shared memory; `args` are the parameters as 64-bit slots, then `pack` (when
    /// given) as the last parameter, by value.
    pub(crate) fn launch(
        &self,
        name: &str,
        grid: (u32, u32),
        block: u32,
        smem: u32,
        args: &[u64],
        pack: Option<&ScalarPack>,
    ) -> Result<()> {
        let _g = lock(&self.inner.launch);
        match &self.inner.engine {
            Engine::Cuda(c) => {
                let f = c
                    .funcs
                    .get(name)
                    .ok_or_else(|| GpuError::Invalid(format!("no kernel named {name}")))?;
                let mut b = c.stream.launch_builder(f);
                for a in args {
                    cudarc::driver::PushKernelArg::arg(&mut b, a);
                }
                if let Some(p) = pack {
                    cudarc::driver::PushKernelArg::arg(&mut b, p);
                }
                let cfg = LaunchConfig {
                    grid_dim: (grid.0, grid.1, 1),
                    block_dim: (block, 1, 1),
                    shared_mem_bytes: smem,
                };
                // SAFETY: every kernel's parameters are 64-bit or narrower integers and device
                // addresses; callers pass one slot per parameter with addresses of live
                // buffers large enough for the launch shape (checked by the ops that build them).
                unsafe { b.launch(cfg) }
                    .map(|_| ())
                    .map_err(driver_err("launching a kernel"))
            }
            Engine::Emulator => {
                let cname = std::ffi::CString::new(name)
                    .map_err(|_| GpuError::Invalid(format!("bad kernel name {name}")))?;
                let mut slots: Vec<u64> = args.to_vec();
                let mut pack_copy = pack.copied();
                let mut ptrs: Vec<*mut std::ffi::c_void> = slots
                    .iter_mut()
                    .map(|s| s as *mut u64 as *mut std::ffi::c_void)
                    .collect();
                if let Some(p) = pack_copy.as_mut() {
                    ptrs.push(p as *mut ScalarPack as *mut std::ffi::c_void);
                }
                // SAFETY: the emulator reads one parameter from each slot pointer (all live
                // for the call) and runs the kernel on host memory whose addresses the ops
                // passed (live buffers, sized for the launch shape).
                let rc = unsafe {
                    hk_emu_launch(
                        cname.as_ptr(),
                        grid.0,
                        grid.1,
                        block,
                        smem,
                        ptrs.as_mut_ptr(),
                        ptrs.len() as u32,
                    )
                };
                match rc {
                    0 => Ok(()),
                    -1 => Err(GpuError::Emulator(format!("no kernel named {name}"))),
                    -2 => Err(GpuError::Emulator(format!(
                        "kernel {name} called with {} arguments (wrong count)",
                        ptrs.len()
                    ))),
                    -3 => Err(GpuError::Emulator(format!(
                        "kernel {name}: bad launch shape {grid:?} x {block}"
                    ))),
                    _ => Err(GpuError::Emulator(format!(
                        "kernel {name}: the emulator could not start its threads"
                    ))),
                }
            }
        }
    }

    fn give_back(&self, mem: Mem, bytes: usize) {
        let mut pool = lock(&self.inner.pool);
        pool.stats.live_bytes = pool.stats.live_bytes.saturating_sub(bytes);
        if pool.stats.pooled_bytes + bytes <= pool.limit {
            pool.stats.pooled_bytes += bytes;
            pool.free.entry(bytes).or_default().push(mem);
        }
    }
}

/// The tile policy of [`Gpu::tile_log`] on a GPU with `sms` multiprocessors.
pub(crate) fn cuda_tile_log(log_n: u32, rows: u32, sms: u32, max_tile_log: u32) -> u32 {
    let want = 2 * u64::from(sms.max(1));
    let mut t = max_tile_log.min(log_n);
    let count = crate::context::phase_count(log_n, t);
    while t > 8
        && ((1u64 << (log_n - t)) * u64::from(rows)) < want
        && crate::context::phase_count(log_n, t - 1) == count
    {
        t -= 1;
    }
    t
}

fn arch_for(cc: (i32, i32)) -> &'static str {
    match cc {
        (9, _) => "compute_90",
        (8, 9) => "compute_89",
        (8, 6) | (8, 7) => "compute_86",
        (8, _) => "compute_80",
        (7, 5) => "compute_75",
        (m, _) if m >= 10 => "compute_90",
        _ => "compute_70",
    }
}

extern "C" {
    fn hk_emu_launch(
        name: *const std::ffi::c_char,
        gx: u32,
        gy: u32,
        bx: u32,
        smem: u32,
        args: *mut *mut std::ffi::c_void,
        nargs: u32,
    ) -> i32;
    fn hk_emu_kernel_count() -> u32;
    fn hk_emu_kernel_name(i: u32) -> *const std::ffi::c_char;
}

/// The kernel names compiled into the emulator (for the consistency test).
pub fn emulator_kernels() -> Vec<String> {
    // SAFETY: pure functions of the emulator's static table.
    let count = unsafe { hk_emu_kernel_count() };
    (0..count)
        .filter_map(|i| {
            // SAFETY: `i < count`, so the name is a static NUL-terminated string.
            let p = unsafe { hk_emu_kernel_name(i) };
            if p.is_null() {
                None
            } else {
                // SAFETY: non-null pointer to a static C string (checked).
                Some(
                    unsafe { std::ffi::CStr::from_ptr(p) }
                        .to_string_lossy()
                        .into_owned(),
                )
            }
        })
        .collect()
}

/// Words on the device (or in the emulator's memory). Returned to the pool when dropped.
pub struct GpuBuffer<W: GpuWord> {
    mem: Option<Mem>,
    len: usize,
    gpu: Gpu,
    _w: PhantomData<W>,
}

impl<W: GpuWord> std::fmt::Debug for GpuBuffer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer<u{}>[{}]", W::BYTES * 8, self.len)
    }
}

impl<W: GpuWord> GpuBuffer<W> {
    /// Length in words.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no words.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device this buffer lives on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Device address of word `off` (a kernel argument).
    pub(crate) fn addr(&self, off: usize) -> u64 {
        let base = match (&self.gpu.inner.engine, self.mem.as_ref()) {
            (Engine::Cuda(c), Some(Mem::Cuda(s))) => {
                let (p, _sync) = s.device_ptr(&c.stream);
                p
            }
            (_, Some(Mem::Host(h))) => h.0.as_ptr() as u64,
            _ => 0,
        };
        base + (off * W::BYTES) as u64
    }
}

impl<W: GpuWord> Drop for GpuBuffer<W> {
    fn drop(&mut self) {
        if let Some(m) = self.mem.take() {
            self.gpu.give_back(m, (self.len * W::BYTES).max(8));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        cuda_tile_log, parse_ntt_radix, parse_ntt_threads, parse_ntt_tile, NttShape, NTT_RADIX_ENV,
        NTT_THREADS_ENV, NTT_TILE_ENV,
    };

    #[test]
    fn ntt_tile_setting_is_checked() {
        assert_eq!(parse_ntt_tile(None).expect("default"), NttShape::default());
        let s = parse_ntt_tile(Some("11")).expect("11");
        assert_eq!(
            (s.tile_log, s.upper_tile_log, s.run_log),
            (Some(11), None, 4)
        );
        let s = parse_ntt_tile(Some("12, 10,3")).expect("12,10,3");
        assert_eq!(
            (s.tile_log, s.upper_tile_log, s.run_log),
            (Some(12), Some(10), 3)
        );
        for bad in ["5", "14", "12,5", "12,10,7", "", "x", "12,10,3,1", "12,"] {
            let e = parse_ntt_tile(Some(bad)).expect_err("refused").to_string();
            assert!(e.contains(NTT_TILE_ENV), "{bad}: {e}");
        }
    }

    #[test]
    fn ntt_radix_setting_is_checked() {
        let pair = |v| parse_ntt_radix(v).map(|r| (r.fwd, r.inv, r.packed()));
        assert_eq!(pair(None).expect("default"), (3, 2, 0x203));
        assert_eq!(pair(Some("4")).expect("4"), (2, 2, 0x202));
        assert_eq!(pair(Some("8")).expect("8"), (3, 3, 0x303));
        assert_eq!(pair(Some(" 16")).expect("16"), (4, 4, 0x404));
        assert_eq!(pair(Some("16, 8")).expect("16,8"), (4, 3, 0x304));
        for bad in ["32", "2", "", "x", "8,", ",4", "8,32", "8,4,4"] {
            let e = parse_ntt_radix(Some(bad)).expect_err("refused").to_string();
            assert!(e.contains(NTT_RADIX_ENV), "{bad}: {e}");
        }
    }

    #[test]
    fn ntt_threads_setting_is_checked() {
        assert_eq!(parse_ntt_threads(None).expect("default"), None);
        assert_eq!(parse_ntt_threads(Some("512")).expect("512"), Some(512));
        assert_eq!(parse_ntt_threads(Some(" 64 ")).expect("64"), Some(64));
        for bad in ["0", "16", "300", "2048", "many", ""] {
            let e = parse_ntt_threads(Some(bad))
                .expect_err("refused")
                .to_string();
            assert!(e.contains(NTT_THREADS_ENV), "{bad}: {e}");
        }
    }

    #[test]
    fn tiles_shrink_for_occupancy_but_never_add_a_launch() {
        // H200: 132 multiprocessors.
        assert_eq!(cuda_tile_log(16, 30, 132, 12), 12, "480 blocks already");
        assert_eq!(
            cuda_tile_log(15, 2, 132, 12),
            10,
            "rescale's last limbs: 2 phases kept"
        );
        assert_eq!(
            cuda_tile_log(14, 8, 132, 12),
            9,
            "256 blocks, still 2 phases"
        );
        assert_eq!(
            cuda_tile_log(10, 1, 132, 12),
            10,
            "one phase, never below the ring"
        );
        assert_eq!(cuda_tile_log(17, 60, 132, 12), 12);
        for log_n in 4..=17 {
            for rows in [1, 2, 7, 64] {
                let t = cuda_tile_log(log_n, rows, 132, 12);
                assert!(t <= 12 && (t >= 8 || t == log_n), "{log_n} {rows} -> {t}");
            }
        }
    }
}
