//! # heloom-pool
//!
//! One shared worker pool for the whole process and the thread budget each heavy operation
//! runs with.
//!
//! An operation given a [`Threads`] budget of `t` splits its independent items (RNS limbs,
//! polynomials x limbs, key-switching digits) into at most `t` contiguous chunks, runs the
//! first on the calling thread and the others on the shared pool, and returns when all are
//! done. The calling thread is never a pool worker in heloom's executors, so a waiting task
//! never picks up an unrelated one: while a scheduler keeps the sum of the budgets of running
//! tasks at or below the number of cores, no more threads compute than there are cores.
//!
//! Chunks are static and contiguous (OpenMP's `schedule(static)`), so an operation on `n`
//! equal items costs about `ceil(n / t)` items of time, the model of seed 000 (Suzuki et al.,
//! Table 2: `T(n_q, t) ~ ceil(n_q / t) (a n_q + b)`). Work is split but never reordered in a
//! way that changes a result: items are independent and modular arithmetic is exact, so every
//! result is bit-identical whatever the budget.
//!
//! Budgets nest: a chunk may split its own work again with its share of the budget
//! ([`Threads::share`]), e.g. key-switching digits in parallel, each over limbs. A chunk that
//! waits for its sub-chunks on a worker may run other queued chunks meanwhile (rayon's work
//! stealing); results are unaffected.
//!
//! Pool workers are pinned one per core where the OS allows (`HELOOM_PIN=0` turns this off);
//! the pool size is the number of cores available to the process, or `HELOOM_THREADS`.

use std::sync::{Mutex, OnceLock};

static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

/// Number of cores available to this process (or `HELOOM_THREADS` when set to a positive
/// integer): the capacity a scheduler should budget against.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| {
        std::env::var("HELOOM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

fn pin_enabled() -> bool {
    std::env::var("HELOOM_PIN").map_or(true, |v| v.trim() != "0")
}

/// The shared pool: `cores() - 1` workers, since the thread that calls an operation computes
/// one chunk itself. `None` on a single core or if the OS refused to start threads (then
/// everything runs on the calling thread, which is still correct).
fn pool() -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let workers = cores().saturating_sub(1);
        if workers == 0 {
            return None;
        }
        let core_ids = if pin_enabled() {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("heloom-pool-{i}"))
            .start_handler(move |i| {
                // Worker i on core i + 1: core 0 is left to the calling threads, which the OS
                // places on whatever core is free.
                if let Some(id) = core_ids.get((i + 1) % core_ids.len().max(1)) {
                    let _ = core_affinity::set_for_current(*id);
                }
            })
            .build()
            .ok()
    })
    .as_ref()
}

/// Number of workers in the shared pool (0 on a single core).
pub fn pool_workers() -> usize {
    pool().map_or(0, |p| p.current_num_threads())
}

/// A thread budget for one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Threads(usize);

impl Default for Threads {
    fn default() -> Self {
        Self::single()
    }
}

impl Threads {
    /// A budget of `n` threads (at least 1; more than [`cores`] is allowed but gains nothing).
    pub fn new(n: usize) -> Self {
        Self(n.max(1))
    }

    /// One thread: the operation runs entirely on the calling thread.
    pub fn single() -> Self {
        Self(1)
    }

    /// Every core of the machine.
    pub fn all() -> Self {
        Self(cores())
    }

    /// The budget.
    pub fn get(self) -> usize {
        self.0
    }

    /// Number of chunks `len` items are split into: `min(budget, len, pool workers + 1)`.
    pub fn chunks_for(self, len: usize) -> usize {
        self.0.min(len).min(pool_workers() + 1).max(1)
    }

    /// Calls `f(i, &mut items[i])` for every item, split into at most `budget` contiguous
    /// chunks that run concurrently (the first on the calling thread).
    pub fn for_each_mut<T, F>(self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        let chunks = self.chunks_for(items.len());
        let Some(pool) = pool().filter(|_| chunks > 1) else {
            for (i, x) in items.iter_mut().enumerate() {
                f(i, x);
            }
            return;
        };
        let per = items.len().div_ceil(chunks);
        let f = &f;
        pool.in_place_scope(|s| {
            let mut parts = items.chunks_mut(per).enumerate();
            let first = parts.next();
            for (c, part) in parts {
                s.spawn(move |_| {
                    for (j, x) in part.iter_mut().enumerate() {
                        f(c * per + j, x);
                    }
                });
            }
            if let Some((_, part)) = first {
                for (j, x) in part.iter_mut().enumerate() {
                    f(j, x);
                }
            }
        });
    }

    /// Calls `f(i, chunk_i)` for every `size`-element chunk of `data` (the last may be
    /// shorter): the limbs of a flat limb-major polynomial are its `n`-element chunks.
    pub fn for_each_chunk_mut<T, F>(self, data: &mut [T], size: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        let size = size.max(1);
        if self.chunks_for(data.len().div_ceil(size)) <= 1 {
            // No list of chunk slices to build on one thread.
            for (i, x) in data.chunks_mut(size).enumerate() {
                f(i, x);
            }
            return;
        }
        let mut parts: Vec<&mut [T]> = data.chunks_mut(size).collect();
        self.for_each_mut(&mut parts, |i, p| f(i, p));
    }

    /// [`Self::for_each_mut`] for fallible work, with one scratch value per chunk: `init` runs
    /// once per chunk (on the thread that runs it) and `f(&mut scratch, i, &mut items[i])` for
    /// each of the chunk's items. A chunk stops at its first error; the error returned is that of
    /// the lowest-index item that failed, so errors do not depend on timing for a given budget.
    pub fn try_for_each_init<T, S, E, I, F>(self, items: &mut [T], init: I, f: F) -> Result<(), E>
    where
        T: Send,
        E: Send,
        I: Fn() -> S + Sync,
        F: Fn(&mut S, usize, &mut T) -> Result<(), E> + Sync,
    {
        let chunks = self.chunks_for(items.len());
        let Some(pool) = pool().filter(|_| chunks > 1) else {
            let mut s = init();
            for (i, x) in items.iter_mut().enumerate() {
                f(&mut s, i, x)?;
            }
            return Ok(());
        };
        let per = items.len().div_ceil(chunks);
        let first_err: Mutex<Option<(usize, E)>> = Mutex::new(None);
        let run = |offset: usize, part: &mut [T]| {
            let mut s = init();
            for (j, x) in part.iter_mut().enumerate() {
                if let Err(e) = f(&mut s, offset + j, x) {
                    let mut slot = first_err.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.as_ref().is_none_or(|(i, _)| offset + j < *i) {
                        *slot = Some((offset + j, e));
                    }
                    return;
                }
            }
        };
        let run = &run;
        pool.in_place_scope(|s| {
            let mut parts = items.chunks_mut(per).enumerate();
            let first = parts.next();
            for (c, part) in parts {
                s.spawn(move |_| run(c * per, part));
            }
            if let Some((_, part)) = first {
                run(0, part);
            }
        });
        match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// [`Self::for_each_mut`] for fallible work (see [`Self::try_for_each_init`] for errors).
    pub fn try_for_each_mut<T, E, F>(self, items: &mut [T], f: F) -> Result<(), E>
    where
        T: Send,
        E: Send,
        F: Fn(usize, &mut T) -> Result<(), E> + Sync,
    {
        self.try_for_each_init(items, || (), |_, i, x| f(i, x))
    }

    /// [`Self::for_each_chunk_mut`] for fallible work (see [`Self::try_for_each_init`] for
    /// errors).
    pub fn try_for_each_chunk_mut<T, E, F>(self, data: &mut [T], size: usize, f: F) -> Result<(), E>
    where
        T: Send,
        E: Send,
        F: Fn(usize, &mut [T]) -> Result<(), E> + Sync,
    {
        let size = size.max(1);
        if self.chunks_for(data.len().div_ceil(size)) <= 1 {
            for (i, x) in data.chunks_mut(size).enumerate() {
                f(i, x)?;
            }
            return Ok(());
        }
        let mut parts: Vec<&mut [T]> = data.chunks_mut(size).collect();
        self.try_for_each_mut(&mut parts, |i, p| f(i, p))
    }

    /// The budget of part `i` when this budget is shared among `parts` concurrent parts: the
    /// threads are dealt out as evenly as possible (earlier parts get the extra ones), and
    /// every part gets at least one.
    pub fn share(self, parts: usize, i: usize) -> Threads {
        let parts = parts.max(1);
        Threads::new(self.0 / parts + usize::from(i < self.0 % parts))
    }

    /// The budget that can actually run at once: `min(budget, pool workers + 1)`.
    pub fn effective(self) -> Threads {
        Threads(self.chunks_for(usize::MAX))
    }

    /// `(0..len).map(f)` computed in at most `budget` concurrent chunks, in order.
    pub fn map<R, F>(self, len: usize, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(usize) -> R + Sync,
    {
        let mut out: Vec<Option<R>> = (0..len).map(|_| None).collect();
        self.for_each_mut(&mut out, |i, slot| *slot = Some(f(i)));
        out.into_iter().flatten().collect()
    }

    /// Runs `a` and `b`, concurrently when the budget is at least 2, with the budget split
    /// between them (`a` gets the larger half).
    pub fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce(Threads) -> RA + Send,
        B: FnOnce(Threads) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        let Some(pool) = pool().filter(|_| self.0 > 1) else {
            return (a(Threads(1)), b(Threads(1)));
        };
        let ta = Threads(self.0.div_ceil(2));
        let tb = Threads((self.0 / 2).max(1));
        let mut rb = None;
        let ra = pool.in_place_scope(|s| {
            s.spawn(|_| rb = Some(b(tb)));
            a(ta)
        });
        match rb {
            Some(rb) => (ra, rb),
            // The scope joins every spawned job before returning, so `rb` is set.
            None => unreachable!("rayon scope returned before its spawned job finished"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_each_visits_every_item_once_with_its_index() {
        for t in 1..=5 {
            let mut v = vec![0usize; 13];
            Threads::new(t).for_each_mut(&mut v, |i, x| *x += i + 1);
            assert_eq!(v, (1..=13).collect::<Vec<_>>(), "budget {t}");
        }
    }

    #[test]
    fn map_keeps_order() {
        for t in 1..=4 {
            let v = Threads::new(t).map(10, |i| i * i);
            assert_eq!(v, (0..10).map(|i| i * i).collect::<Vec<_>>());
        }
    }

    #[test]
    fn chunks_cover_a_flat_buffer() {
        let mut data = vec![0u64; 4 * 8];
        Threads::new(3).for_each_chunk_mut(&mut data, 8, |i, limb| {
            for x in limb.iter_mut() {
                *x = i as u64;
            }
        });
        for (i, limb) in data.chunks(8).enumerate() {
            assert!(limb.iter().all(|&x| x == i as u64));
        }
    }

    #[test]
    fn join_runs_both() {
        let (a, b) = Threads::new(2).join(|t| t.get() * 10, |t| t.get() + 1);
        assert_eq!((a, b), (10, 2));
        let (a, b) = Threads::new(1).join(|_| 1, |_| 2);
        assert_eq!((a, b), (1, 2));
    }

    #[test]
    fn try_for_each_reports_the_first_failing_item() {
        for t in 1..=5 {
            let mut v = vec![0usize; 13];
            let r = Threads::new(t).try_for_each_mut(&mut v, |i, x| {
                if i % 5 == 4 {
                    return Err(i);
                }
                *x = i;
                Ok(())
            });
            assert_eq!(r, Err(4), "budget {t}");
            let r: Result<(), ()> = Threads::new(t).try_for_each_mut(&mut v, |i, x| {
                *x = i;
                Ok(())
            });
            assert_eq!(r, Ok(()));
            assert_eq!(v, (0..13).collect::<Vec<_>>());
        }
    }

    #[test]
    fn try_for_each_init_makes_one_scratch_per_chunk() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for t in 1..=4 {
            let inits = AtomicUsize::new(0);
            let mut v = vec![0u64; 10];
            Threads::new(t)
                .try_for_each_init(
                    &mut v,
                    || {
                        inits.fetch_add(1, Ordering::Relaxed);
                        vec![0u64; 4]
                    },
                    |s, i, x| {
                        s[0] += 1;
                        *x = i as u64 * 2;
                        Ok::<(), ()>(())
                    },
                )
                .expect("no error");
            assert_eq!(v, (0..10).map(|i| i * 2).collect::<Vec<_>>());
            assert!(inits.load(Ordering::Relaxed) <= Threads::new(t).chunks_for(10));
        }
    }

    #[test]
    fn try_chunks_cover_a_flat_buffer() {
        for t in 1..=4 {
            let mut data = vec![0u64; 5 * 8];
            Threads::new(t)
                .try_for_each_chunk_mut(&mut data, 8, |i, limb| {
                    limb.fill(i as u64);
                    Ok::<(), ()>(())
                })
                .expect("no error");
            for (i, limb) in data.chunks(8).enumerate() {
                assert!(limb.iter().all(|&x| x == i as u64));
            }
        }
    }

    #[test]
    fn shares_add_up() {
        for t in 1..=9 {
            for parts in 1..=5 {
                let b = Threads::new(t);
                let sum: usize = (0..parts).map(|i| b.share(parts, i).get()).sum();
                assert_eq!(sum, t.max(parts), "t {t} parts {parts}");
            }
        }
    }

    #[test]
    fn budgets_are_at_least_one() {
        assert_eq!(Threads::new(0).get(), 1);
        assert_eq!(Threads::default().get(), 1);
        assert!(Threads::all().get() >= 1);
    }
}

/// mimalloc's `mi_option_purge_delay` (its option enum in mimalloc 3, checked by a test).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps memory the mimalloc allocator frees mapped for reuse instead of handing it back to
/// the OS (mimalloc purges freed pages after about a second). HE workloads free and
/// reallocate the same multi-megabyte polynomials over and over; every purged page comes back
/// as a page fault plus a kernel zeroing, which measured up to half of a CryptoNets batch's
/// time on a VM (3.3 s of convolution became 0.8 s). The cost is that the process keeps its
/// peak memory resident. heloom-math allocates every polynomial buffer from mimalloc whatever
/// the global allocator, so every CKKS context calls this, as do the binaries that use
/// mimalloc as the global allocator (the CLI, the Python module) at start;
/// `HELOOM_KEEP_MEMORY=0`, or an explicit `MIMALLOC_PURGE_DELAY`, leaves mimalloc's setting
/// alone.
pub fn retain_freed_memory() {
    if RETURN_FREED.load(std::sync::atomic::Ordering::Relaxed)
        || std::env::var("HELOOM_KEEP_MEMORY").is_ok_and(|v| v.trim() == "0")
        || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some()
    {
        return;
    }
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table (atomically); it
    // takes no pointers, and -1 ("never purge") is a documented value of this option.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    retain_system_allocator_memory();
}

/// The same for glibc's allocator, which a program on the system allocator uses: blocks up to
/// 32 MiB come from the heap instead of fresh `mmap`s, and the heap's free top is not given
/// back to the OS, so a freed polynomial's pages are reused without page faults (measured:
/// key switching at N = 2^14 a quarter faster). Called by [`retain_freed_memory`], with the
/// same opt-out.
pub fn retain_system_allocator_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if RETURN_FREED.load(std::sync::atomic::Ordering::Relaxed)
        || std::env::var("HELOOM_KEEP_MEMORY").is_ok_and(|v| v.trim() == "0")
    {
        return;
    }
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: `mallopt` sets one integer parameter of glibc's allocator; it takes no
            // pointers. 32 MiB is glibc's largest mmap threshold on 64-bit targets; an
            // out-of-range value is refused (returns 0) and changes nothing.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
            }
        }
    });
}

/// Set by [`return_freed_memory`]: retaining is off for the rest of the process.
static RETURN_FREED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The opposite of [`retain_freed_memory`], for a process that must stay within a memory
/// budget (`heloom serve --memory-budget`): from now on mimalloc hands freed pages back to
/// the OS after 10 ms (its default) and glibc trims its heap at its default threshold, and
/// later calls of [`retain_freed_memory`] (every new CKKS context makes one) do nothing.
/// Resident memory then follows what is in use, at the cost of page faults on reuse.
pub fn return_freed_memory() {
    RETURN_FREED.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table; 10 (ms) is its
    // documented default purge delay.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` sets one integer parameter of glibc's allocator; 128 KiB is the
        // default of both thresholds.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        }
    }
}

/// Whether freed memory stays mapped (mimalloc's purge delay is negative).
pub fn freed_memory_retained() -> bool {
    // SAFETY: reads one integer from mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) < 0 }
}

#[cfg(test)]
mod memory_tests {
    #[test]
    fn purge_delay_option_is_the_one_set() {
        // mimalloc's default purge delay is positive; after the call it reads back as -1, so
        // the enum value above names the right option.
        if std::env::var("HELOOM_KEEP_MEMORY").is_ok_and(|v| v.trim() == "0")
            || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some()
        {
            return;
        }
        // SAFETY: reads one integer from mimalloc's option table.
        let before = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert!(before > 0, "default purge delay {before}");
        assert!(!super::freed_memory_retained());
        super::retain_freed_memory();
        assert!(super::freed_memory_retained());
        // SAFETY: as above.
        let after = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(after, -1);
    }
}

/// A memory field of a process's `/proc/<pid>/status`, in bytes: `field` is the name before the
/// colon (a trailing colon is allowed), e.g. `VmRSS` (resident now) or `VmHWM` (the most
/// resident so far); `pid` is a process, or `None` for this one. `None` where the file or the
/// field is missing or the field is not a size in kB: on every OS but Linux, and for a process
/// that has exited.
pub fn proc_status_bytes(pid: Option<u32>, field: &str) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    status_field_bytes(&std::fs::read_to_string(path).ok()?, field)
}

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`); `None` where that
/// file is missing (every OS but Linux).
pub fn total_memory_bytes() -> Option<u64> {
    status_field_bytes(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemTotal")
}

/// `field` (`VmRSS`, `VmRSS:`) in the text of a `/proc/<pid>/status`, bytes (the file gives kB).
fn status_field_bytes(status: &str, field: &str) -> Option<u64> {
    let field = field.strip_suffix(':').unwrap_or(field);
    status.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name != field {
            return None;
        }
        let mut words = value.split_whitespace();
        let kb: u64 = words.next()?.parse().ok()?;
        if words.next() != Some("kB") {
            return None;
        }
        kb.checked_mul(1024)
    })
}

#[cfg(test)]
mod proc_status_tests {
    use super::{proc_status_bytes, status_field_bytes};

    #[test]
    fn fields_are_read_in_bytes() {
        let text = "Name:\theloom\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n";
        assert_eq!(status_field_bytes(text, "VmRSS"), Some(1 << 20));
        assert_eq!(status_field_bytes(text, "VmHWM:"), Some(2 << 20));
        // Only the exact name, and only sizes.
        assert_eq!(status_field_bytes(text, "VmRS"), None);
        assert_eq!(status_field_bytes(text, "Threads"), None);
        assert_eq!(status_field_bytes(text, "VmSwap"), None);
    }

    #[test]
    fn this_process_has_a_resident_size_on_linux() {
        let rss = proc_status_bytes(None, "VmRSS");
        // Read after VmRSS: the high-water mark is at least any earlier resident size.
        let hwm = proc_status_bytes(Some(std::process::id()), "VmHWM");
        if cfg!(target_os = "linux") {
            let (Some(rss), Some(hwm)) = (rss, hwm) else {
                panic!("no VmRSS or VmHWM: {rss:?} {hwm:?}");
            };
            assert!(rss > 0 && hwm >= rss, "VmRSS {rss}, VmHWM {hwm}");
            let total = super::total_memory_bytes().expect("MemTotal");
            assert!(
                total > hwm,
                "MemTotal {total} below this process's VmHWM {hwm}"
            );
        } else {
            assert_eq!((rss, hwm), (None, None));
            assert_eq!(super::total_memory_bytes(), None);
        }
    }
}
